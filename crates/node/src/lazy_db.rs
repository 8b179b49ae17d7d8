//! A redb database in a store's directory, opened on first use: a store that never needs it
//! never creates it, and stores over one directory in a process share one open of it (redb
//! allows one open per file). The node's bucket index and its share of the object index
//! are such databases.

use redb::{Database, TableDefinition};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};

pub(crate) struct LazyDb {
    pub path: PathBuf,
    table: TableDefinition<'static, &'static str, &'static [u8]>,
    db: OnceLock<Arc<Database>>,
}

/// The open databases of this process, by path.
fn registry() -> &'static Mutex<HashMap<PathBuf, Weak<Database>>> {
    static OPEN: OnceLock<Mutex<HashMap<PathBuf, Weak<Database>>>> = OnceLock::new();
    OPEN.get_or_init(Default::default)
}

/// The database at `path`, created with `table` if need be: the one this process has open
/// already, else a new open.
fn open_shared(path: &Path, table: TableDefinition<&str, &[u8]>) -> Result<Arc<Database>, redb::Error> {
    let mut open = registry().lock().expect("database registry");
    if let Some(db) = open.get(path).and_then(Weak::upgrade) {
        return Ok(db);
    }
    let db = Database::create(path)?;
    let w = db.begin_write()?;
    w.open_table(table)?;
    w.commit()?;
    let db = Arc::new(db);
    open.retain(|_, w| w.strong_count() > 0);
    open.insert(path.to_path_buf(), Arc::downgrade(&db));
    Ok(db)
}

impl std::fmt::Debug for LazyDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDb").field("path", &self.path).field("open", &self.db.get().is_some()).finish()
    }
}

impl LazyDb {
    /// The database `file` in `dir`, whose one table is `table`.
    pub fn new(dir: &Path, file: &str, table: TableDefinition<'static, &'static str, &'static [u8]>) -> Self {
        LazyDb { path: dir.join(file), table, db: OnceLock::new() }
    }

    /// The database, created when `create`; None while there is none. Errors are the
    /// database's; the caller says which file.
    pub fn get(&self, create: bool) -> Result<Option<&Arc<Database>>, redb::Error> {
        if let Some(db) = self.db.get() {
            return Ok(Some(db));
        }
        if !create && !self.path.exists() {
            return Ok(None);
        }
        let db = open_shared(&self.path, self.table)?;
        Ok(Some(self.db.get_or_init(|| db)))
    }
}
