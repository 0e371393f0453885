//! Strict scalar deserializers for the schema.
//!
//! Why: the `config` crate converts leniently — a float is rounded into an integer field
//! (`max_retries = 2.5` → 3, `-1.0` → 0), a boolean becomes 0/1, any number becomes a
//! boolean. Each of those hides a typo, so numbers and booleans in the schema go through
//! these visitors instead, which accept only the intended type (or a string that parses
//! as it exactly, since environment values arrive as strings) and otherwise fail with
//! serde's "invalid type/value: …, expected …" message naming the value and what is
//! allowed. The loader prefixes that message with the key path.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, SeqAccess, Unexpected, Visitor};
use serde::Deserialize;

/// Unsigned integer targets of [`int`].
pub(super) trait UInt: Copy + TryFrom<u64> {
    const MAX: u64;
}
impl UInt for u16 {
    const MAX: u64 = u16::MAX as u64;
}
impl UInt for u32 {
    const MAX: u64 = u32::MAX as u64;
}
impl UInt for u64 {
    const MAX: u64 = u64::MAX;
}

struct IntVisitor<T>(PhantomData<T>);

impl<T: UInt> IntVisitor<T> {
    fn convert<E: de::Error>(&self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), self))
    }
}

impl<T: UInt> Visitor<'_> for IntVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number in 0..={}", T::MAX)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        self.convert(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(u) => self.convert(u),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Err(E::invalid_type(Unexpected::Float(v), &self))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        let t = v.trim();
        if let Ok(u) = t.parse::<u64>() {
            self.convert(u)
        } else if let Ok(i) = t.parse::<i64>() {
            self.visit_i64(i)
        } else {
            Err(E::invalid_type(Unexpected::Str(v), &self))
        }
    }
}

/// An unsigned integer, exactly: no floats, booleans or rounding.
pub(super) fn int<'de, D: Deserializer<'de>, T: UInt>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(IntVisitor(PhantomData))
}

/// [`int`] for an optional field (absent or explicit nil = `None`).
pub(super) fn opt_int<'de, D: Deserializer<'de>, T: UInt>(d: D) -> Result<Option<T>, D::Error> {
    d.deserialize_option(OptVisitor(IntVisitor::<T>(PhantomData)))
}

struct FloatVisitor;

impl Visitor<'_> for FloatVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        v.trim()
            .parse::<f64>()
            .map_err(|_| E::invalid_type(Unexpected::Str(v), &self))
    }
}

/// A number (integers are accepted and converted); range checks are `validate`'s job.
pub(super) fn float<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(FloatVisitor)
}

/// [`float`] for an optional field.
pub(super) fn opt_float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_option(OptVisitor(FloatVisitor))
}

struct BoolVisitor;

impl Visitor<'_> for BoolVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("true or false")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(E::invalid_type(Unexpected::Str(v), &self)),
        }
    }
}

/// `true` or `false`, exactly (no 0/1, no "yes").
pub(super) fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    d.deserialize_any(BoolVisitor)
}

/// Wraps a scalar visitor to read an `Option` of it.
struct OptVisitor<V>(V);

impl<'de, V: Visitor<'de> + Copy> Visitor<'de> for OptVisitor<V> {
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self.0).map(Some)
    }
}

impl<T> Clone for IntVisitor<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for IntVisitor<T> {}
impl Clone for FloatVisitor {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for FloatVisitor {}

/// One HTTP status in a list, read with [`int`].
struct Status(u16);

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int(d).map(Status)
    }
}

struct StatusListVisitor;

impl<'de> Visitor<'de> for StatusListVisitor {
    type Value = Vec<u16>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of HTTP status codes, e.g. [429, 503] or \"429,503\"")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u16>, A::Error> {
        let mut out = Vec::new();
        while let Some(Status(s)) = seq.next_element()? {
            out.push(s);
        }
        Ok(out)
    }

    // A single number: what `try_parsing` makes of `EXITCRAWL__LIMITER__THROTTLE_STATUSES=429`.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<u16>, E> {
        IntVisitor::<u16>(PhantomData).visit_i64(v).map(|s| vec![s])
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<u16>, E> {
        IntVisitor::<u16>(PhantomData).visit_u64(v).map(|s| vec![s])
    }

    // A comma-separated list, as an environment variable can only hold a string.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u16>, E> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u16>()
                    .map_err(|_| E::invalid_value(Unexpected::Str(v), &self))
            })
            .collect()
    }
}

/// `[429, 503]`, `429` or `"429,503"`; range checks are `validate`'s job.
pub(super) fn status_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
    d.deserialize_any(StatusListVisitor)
}

#[cfg(test)]
mod tests {
    use config::{Value, ValueKind};

    use super::*;

    fn v(kind: ValueKind) -> Value {
        Value::new(None, kind)
    }

    #[test]
    fn int_accepts_exact_integers_only() {
        assert_eq!(int::<_, u32>(v(ValueKind::I64(7))).unwrap(), 7);
        assert_eq!(
            int::<_, u32>(v(ValueKind::String(" 7 ".into()))).unwrap(),
            7
        );
        assert_eq!(
            int::<_, u64>(v(ValueKind::U64(u64::MAX))).unwrap(),
            u64::MAX
        );
        for bad in [
            ValueKind::I64(-1),
            ValueKind::I64(1 << 40),
            ValueKind::Float(2.0),
            ValueKind::Boolean(true),
            ValueKind::String("seven".into()),
            ValueKind::Nil,
            ValueKind::Array(vec![]),
        ] {
            assert!(int::<_, u32>(v(bad.clone())).is_err(), "{bad:?}");
        }
        let e = int::<_, u16>(v(ValueKind::I64(70_000)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("70000") && e.contains("0..=65535"), "{e}");
    }

    #[test]
    fn float_accepts_numbers_and_numeric_strings() {
        assert_eq!(float(v(ValueKind::I64(3))).unwrap(), 3.0);
        assert_eq!(float(v(ValueKind::Float(0.5))).unwrap(), 0.5);
        assert_eq!(float(v(ValueKind::String("2.5".into()))).unwrap(), 2.5);
        assert!(float(v(ValueKind::Boolean(true))).is_err());
        assert!(float(v(ValueKind::String("fast".into()))).is_err());
        assert_eq!(opt_float(v(ValueKind::Nil)).unwrap(), None);
        assert_eq!(opt_float(v(ValueKind::I64(2))).unwrap(), Some(2.0));
        assert_eq!(opt_int::<_, u32>(v(ValueKind::I64(2))).unwrap(), Some(2));
        assert!(opt_int::<_, u32>(v(ValueKind::Float(2.5))).is_err());
    }

    #[test]
    fn boolean_accepts_true_and_false_only() {
        assert!(boolean(v(ValueKind::Boolean(true))).unwrap());
        assert!(!boolean(v(ValueKind::String("False".into()))).unwrap());
        assert!(boolean(v(ValueKind::I64(1))).is_err());
        assert!(boolean(v(ValueKind::String("yes".into()))).is_err());
    }

    #[test]
    fn status_lists_come_as_arrays_numbers_or_comma_separated_strings() {
        let arr = ValueKind::Array(vec![v(ValueKind::I64(429)), v(ValueKind::I64(503))]);
        assert_eq!(status_list(v(arr)).unwrap(), vec![429, 503]);
        assert_eq!(status_list(v(ValueKind::I64(429))).unwrap(), vec![429]);
        assert_eq!(
            status_list(v(ValueKind::String("429, 503,".into()))).unwrap(),
            vec![429, 503]
        );
        assert_eq!(
            status_list(v(ValueKind::String(String::new()))).unwrap(),
            Vec::<u16>::new()
        );
        assert!(status_list(v(ValueKind::String("429,x".into()))).is_err());
        assert!(status_list(v(ValueKind::Float(429.0))).is_err());
    }
}
