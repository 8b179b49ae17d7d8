//! The coordinator's status page in a real browser (headless Chromium, Debian's
//! `chromium-headless-shell`): it loads without console errors, shows every node, and during
//! a repair shows its progress moving. Where no Chromium is installed the test says so and
//! skips, except under CI, where `.ci/run` installs it. `STATUS_SCREENSHOT=FILE` also saves a
//! screenshot taken during the repair (the README's).

use kintsugi_coord::CoordConfig;
use kintsugi_plan::schedule::Scheduler;
use kintsugi_plan::Shape;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NODES: usize = 7;

mod common;

fn browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium-headless-shell", "chromium", "chromium-browser"]
        .iter()
        .find_map(|b| std::env::split_paths(&path).map(|d| d.join(b)).find(|p| p.is_file()))
}

/// The page as the browser has it once its script has run; and the console lines it logged.
fn load(browser: &Path, url: &str, screenshot: Option<&str>) -> (String, Vec<String>) {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=1500",
    ]);
    match screenshot {
        Some(f) => c.args(["--hide-scrollbars", "--window-size=1280,1000", &format!("--screenshot={f}")]),
        None => c.arg("--dump-dom"),
    };
    let out = c.arg(url).output().expect("running the browser");
    let console = String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains("CONSOLE")).map(str::to_string).collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// The text of the element with `id` in a dumped page.
fn text_of(dom: &str, id: &str) -> String {
    let Some(at) = dom.find(&format!("id=\"{id}\"")) else { return String::new() };
    let rest = &dom[at..];
    let start = rest.find('>').map_or(rest.len(), |i| i + 1);
    rest[start..].split('<').next().unwrap_or("").to_string()
}

/// "X of Y chunks rebuilt ..." as (X, Y).
fn progress(dom: &str) -> Option<(u64, u64)> {
    let t = text_of(dom, "repair-progress");
    let mut w = t.split_whitespace();
    let done = w.next()?.parse().ok()?;
    w.next().filter(|&o| o == "of")?;
    Some((done, w.next()?.parse().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_page_shows_every_node_and_a_repair_moving() {
    let Some(browser) = browser() else {
        assert!(std::env::var("CI").is_err(), "CI must have headless Chromium (.ci/run installs chromium-headless-shell)");
        eprintln!("skipping: no headless Chromium installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let conf = CoordConfig { chunk_size: 256 << 10, metrics_listen: Some("127.0.0.1:0".into()), ..common::cfg(dir.path(), "127.0.0.1:0") };
    // Slow links (1 MB/s each way), so that the repair below lasts some 15 s: time for
    // several page loads on a busy machine.
    let mut c = common::cluster_with(conf, dir.path(), NODES, Some(1e6)).await;
    let client = c.client.clone();
    let url = format!("http://{}/", c.coord.as_ref().unwrap().metrics_addr.unwrap());
    let b = browser.clone();
    let u = url.clone();
    let (dom, console) = tokio::task::spawn_blocking(move || load(&b, &u, None)).await.unwrap();
    assert!(console.is_empty(), "console: {console:?}");
    for i in 0..NODES {
        assert!(dom.contains(&format!("data-node=\"{i}\"")), "node {i} is not shown:\n{dom}");
    }
    assert_eq!(text_of(&dom, "error"), "", "{dom}");

    // 16 stripes of RS(4,2) over 7 nodes; a node fails and its chunks are rebuilt one at a time.
    let data: Vec<u8> = (0..16u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8).collect();
    client.put("obj", &data, "rs:4,2".parse().unwrap(), 0).await.unwrap();
    c.kill(3).await;
    client.fail(3).await.unwrap();
    let c2 = client.clone();
    let repair = tokio::spawn(async move { c2.repair(Shape::Cr, 64 << 10, 1, Scheduler::Random).await });
    // Dumps during the repair: its progress moves.
    let mut seen: Vec<(u64, u64, String)> = Vec::new();
    let start = Instant::now();
    while !repair.is_finished() && start.elapsed() < Duration::from_secs(60) {
        let b = browser.clone();
        let u = url.clone();
        let (dom, console) = tokio::task::spawn_blocking(move || load(&b, &u, None)).await.unwrap();
        assert!(console.is_empty(), "console: {console:?}");
        if let Some((done, total)) = progress(&dom) {
            seen.push((done, total, text_of(&dom, "repair-state")));
        }
        if let Ok(f) = std::env::var("STATUS_SCREENSHOT") {
            if seen.last().is_some_and(|s| s.2.starts_with("repair running") && s.0 * 4 >= s.1) && !Path::new(&f).exists() {
                let b = browser.clone();
                let u = url.clone();
                tokio::task::spawn_blocking(move || load(&b, &u, Some(&f))).await.unwrap();
            }
        }
    }
    let r = repair.await.unwrap().unwrap();
    assert!(r.repaired > 0 && r.failed == 0, "{r:?}");
    let running: Vec<&(u64, u64, String)> = seen.iter().filter(|s| s.2.starts_with("repair running")).collect();
    assert!(running.len() >= 2, "the page saw the repair running at least twice: {seen:?}");
    assert!(running.windows(2).any(|w| w[1].0 > w[0].0), "progress moved while it ran: {seen:?}");
    assert!(running.iter().all(|s| s.1 == r.lost as u64), "the run's total is its lost chunks ({}): {seen:?}", r.lost);
    // Once done, the page says so.
    let (dom, _) = tokio::task::spawn_blocking(move || load(&browser, &url, None)).await.unwrap();
    assert_eq!(progress(&dom), Some((r.repaired as u64, r.lost as u64)), "{dom}");
    assert!(text_of(&dom, "repair-state").starts_with("last repair, finished"), "{dom}");
    c.stop().await;
}
