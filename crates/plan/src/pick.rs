//! A flag's or setting's value that is either `auto` or one fixed choice: `--method auto`,
//! `--scheduler auto`, `repair_method = "auto"`. What `auto` then picks is the simulator's
//! call (`kintsugi_sim::auto`); this type only carries the ask, on the command line, in a
//! configuration file and over the wire, by the same names.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// `auto`, or one fixed choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pick<T> {
    Auto,
    Fixed(T),
}

impl<T> Pick<T> {
    pub fn fixed(self) -> Option<T> {
        match self {
            Pick::Auto => None,
            Pick::Fixed(t) => Some(t),
        }
    }

    pub fn is_auto(&self) -> bool {
        matches!(self, Pick::Auto)
    }
}

impl<T> From<T> for Pick<T> {
    fn from(t: T) -> Self {
        Pick::Fixed(t)
    }
}

impl<T: std::str::FromStr> std::str::FromStr for Pick<T> {
    type Err = T::Err;
    fn from_str(s: &str) -> Result<Self, T::Err> {
        if s.eq_ignore_ascii_case("auto") {
            Ok(Pick::Auto)
        } else {
            s.parse().map(Pick::Fixed)
        }
    }
}

impl<T: fmt::Display> fmt::Display for Pick<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pick::Auto => write!(f, "auto"),
            Pick::Fixed(t) => write!(f, "{t}"),
        }
    }
}

/// By name, as the flag takes it: a configuration file says `"auto"` or `"ecpipe"`.
impl<T: fmt::Display> Serialize for Pick<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de, T: std::str::FromStr> Deserialize<'de> for Pick<T>
where
    T::Err: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(|e| serde::de::Error::custom(format!("'{s}': {e} (or auto)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Scheduler;
    use crate::Shape;

    #[test]
    fn parses_auto_or_a_fixed_name_and_prints_it_back() {
        assert_eq!("AUTO".parse::<Pick<Shape>>().unwrap(), Pick::Auto);
        assert_eq!("ppr".parse::<Pick<Shape>>().unwrap(), Pick::Fixed(Shape::Ppr));
        assert!("bogus".parse::<Pick<Shape>>().is_err());
        for s in ["auto", "chameleon", "repairboost"] {
            assert_eq!(s.parse::<Pick<Scheduler>>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn serde_uses_the_names() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct C {
            m: Pick<Shape>,
        }
        let c: C = serde_json::from_str(r#"{"m":"ecpipe"}"#).unwrap();
        assert_eq!(c.m, Pick::Fixed(Shape::Ecpipe));
        assert_eq!(serde_json::to_string(&C { m: Pick::Auto }).unwrap(), r#"{"m":"auto"}"#);
        let e = serde_json::from_str::<C>(r#"{"m":"fast"}"#).unwrap_err().to_string();
        assert!(e.contains("'fast'") && e.contains("or auto"), "{e}");
    }
}
