//! A module filter's info (`BF.INFO` of each key, and its TTL), and how what `BF.INFO` reports
//! of a filter another client made is compared with this client's parameters.

use super::Module;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::info::KeyTtl;
use crate::io::exec::Exec;
use redis::aio::ConnectionLike;
use redis::Value;

/// What [`ModuleBloom::info`](crate::ModuleBloom) reports: what `BF.INFO` says of each of the
/// filter's module keys, added up, and their TTL.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ModuleInfo {
    /// The filter's key.
    pub key: String,
    /// The items the filter holds before it scales (or, non-scaling, refuses more): `BF.INFO`'s
    /// `Capacity`, all keys together; 0 when no key exists yet.
    pub capacity: u64,
    /// The bytes the module's filters take (`BF.INFO`'s `Size`), all keys together.
    pub bytes: u64,
    /// The module's sub-filters (`Number of filters`; one more each time a scaling filter
    /// fills), all keys together.
    pub filters: u64,
    /// The items added that were new (`Number of items inserted`), all keys together.
    pub items: u64,
    /// Each new sub-filter's size over the one before (`Expansion rate`); `None` for a
    /// non-scaling filter, or when no key exists yet.
    pub expansion: Option<u32>,
    /// The error rate this handle was built with (`BF.INFO` does not report the module's).
    pub false_positive_rate: f64,
    /// The keys' time to live (the longest-lived key's, for a sharded filter; a windowed
    /// filter's: its parameters').
    pub ttl: KeyTtl,
    /// A windowed filter's window (`None`: no window); the other figures are its live
    /// generations' added up.
    pub window: Option<std::time::Duration>,
    /// A windowed filter's generations (`None`: no window).
    pub generations: Option<u32>,
}

/// What `BF.INFO` reports of one module key.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reported {
    pub(crate) capacity: u64,
    pub(crate) bytes: u64,
    pub(crate) filters: u64,
    pub(crate) items: u64,
    /// `None`: a non-scaling filter.
    pub(crate) expansion: Option<u32>,
    /// The error rate, where the module reports it (valkey-bloom does; RedisBloom 2.8 does
    /// not).
    pub(crate) error_rate: Option<f64>,
}

/// One part's info.
#[derive(Debug)]
pub struct PartInfo {
    pub(super) reported: Option<Reported>,
    pub(super) ttl: KeyTtl,
}

/// `BF.INFO key`, read.
pub(super) async fn read<C>(exec: &Exec<C>, key: &str) -> Result<Reported>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let reply: Value = exec.query(key, redis::cmd("BF.INFO").arg(key)).await?;
    parse(&reply)
}

/// `BF.INFO`'s reply: name and value pairs (RedisBloom 2.8: `Capacity`, `Size`, `Number of
/// filters`, `Number of items inserted`, `Expansion rate`, nil for a non-scaling filter).
pub(super) fn parse(reply: &Value) -> Result<Reported> {
    let unexpected = || Error::UnexpectedReply(format!("{reply:?} from BF.INFO"));
    let pairs: Vec<(String, &Value)> = match reply {
        Value::Array(values) => values
            .chunks(2)
            .filter_map(|pair| match pair {
                [Value::BulkString(name), value] => {
                    Some((String::from_utf8_lossy(name).to_ascii_lowercase(), value))
                }
                [Value::SimpleString(name), value] => Some((name.to_ascii_lowercase(), value)),
                _ => None,
            })
            .collect(),
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(name, value)| match name {
                Value::BulkString(name) => {
                    Some((String::from_utf8_lossy(name).to_ascii_lowercase(), value))
                }
                Value::SimpleString(name) => Some((name.to_ascii_lowercase(), value)),
                _ => None,
            })
            .collect(),
        _ => return Err(unexpected()),
    };
    let number = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, value)| match value {
                Value::Int(n) => u64::try_from(*n).ok(),
                _ => None,
            })
    };
    let error_rate =
        pairs
            .iter()
            .find(|(n, _)| n == "error rate")
            .and_then(|(_, value)| match value {
                Value::Double(rate) => Some(*rate),
                Value::BulkString(text) => std::str::from_utf8(text).ok()?.parse().ok(),
                Value::SimpleString(text) => text.parse().ok(),
                _ => None,
            });
    Ok(Reported {
        error_rate,
        capacity: number("capacity").ok_or_else(unexpected)?,
        bytes: number("size").unwrap_or(0),
        filters: number("number of filters").unwrap_or(1),
        items: number("number of items inserted").unwrap_or(0),
        expansion: number("expansion rate").and_then(|e| u32::try_from(e).ok()),
    })
}

/// `Ok` when what `BF.INFO` reports of a filter another client made agrees with this
/// client's parameters (SPEC.md §7): its expansion when this client gives one (a non-scaling
/// filter has none), the capacity of a non-scaling filter, and the error rate where the
/// module reports it (RedisBloom 2.8 does not). Else [`Error::ParamsMismatch`].
pub(super) fn agrees<C>(ctx: Ctx<'_, C, Module>, found: &Reported) -> Result<()> {
    let kind = ctx.kind();
    let shape = match found.expansion {
        None => kind.growth.is_none() && found.capacity == kind.per_part,
        Some(expansion) => kind.growth.is_none_or(|growth| growth == expansion),
    };
    let rate = found
        .error_rate
        .is_none_or(|rate| (rate - kind.fpr).abs() <= kind.fpr * 1e-9);
    if shape && rate {
        return Ok(());
    }
    let expansion = match found.expansion {
        Some(expansion) => format!("expansion={expansion}"),
        None => "nonscaling".to_owned(),
    };
    let rate = found
        .error_rate
        .map(|rate| format!(" error_rate={rate}"))
        .unwrap_or_default();
    Err(Error::ParamsMismatch {
        key: ctx.key().to_owned(),
        stored: format!(
            "BF.INFO capacity={} {expansion}{rate} (a module filter another client made, with \
             no stored parameters)",
            found.capacity
        ),
        requested: kind.fingerprint.clone(),
    })
}

/// One part's info: its TTL, and `BF.INFO` when the key exists (parameters of a filter of one
/// key checked first).
pub(super) async fn part<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<PartInfo> {
    let done = async {
        super::steps::ensure_commands(ctx).await?;
        let part = ctx.part();
        if ctx.guard().is_some() && part.state() == super::UNKNOWN {
            super::steps::probe(ctx).await?;
        }
        let pttl: i64 = ctx
            .exec()
            .query(&part.key, redis::cmd("PTTL").arg(&part.key))
            .await?;
        let ttl = KeyTtl::from_pttl(pttl);
        let reported = match ttl {
            KeyTtl::Missing => None,
            _ => Some(read(ctx.exec(), &part.key).await?),
        };
        Ok(PartInfo { reported, ttl })
    };
    super::steps::or_missing(ctx, done.await).await
}

/// The filter's info from every part's.
pub(super) fn total<C>(ctx: Ctx<'_, C, Module>, parts: Vec<PartInfo>) -> ModuleInfo {
    let mut info = ModuleInfo {
        key: ctx.key().to_owned(),
        capacity: 0,
        bytes: 0,
        filters: 0,
        items: 0,
        expansion: None,
        false_positive_rate: ctx.kind().fpr,
        ttl: KeyTtl::Missing,
        window: ctx.kind().window.as_ref().map(super::window::Spec::window),
        generations: ctx
            .kind()
            .window
            .as_ref()
            .map(super::window::Spec::generations),
    };
    for part in parts {
        info.ttl = info.ttl.longest_lived(part.ttl);
        if let Some(found) = part.reported {
            info.capacity += found.capacity;
            info.bytes += found.bytes;
            info.filters += found.filters;
            info.items += found.items;
            info.expansion = info.expansion.or(found.expansion);
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn bf_info_is_read_as_redisbloom_replies_it() {
        let scaling = Value::Array(vec![
            bulk("Capacity"),
            Value::Int(100),
            bulk("Size"),
            Value::Int(240),
            bulk("Number of filters"),
            Value::Int(1),
            bulk("Number of items inserted"),
            Value::Int(3),
            bulk("Expansion rate"),
            Value::Int(2),
        ]);
        let found = parse(&scaling).unwrap();
        assert_eq!(
            (found.capacity, found.bytes, found.filters, found.items),
            (100, 240, 1, 3)
        );
        assert_eq!(found.expansion, Some(2));
        let nonscaling = Value::Array(vec![
            bulk("Capacity"),
            Value::Int(5),
            bulk("Expansion rate"),
            Value::Nil,
        ]);
        assert_eq!(parse(&nonscaling).unwrap().expansion, None);
        assert_eq!(parse(&nonscaling).unwrap().error_rate, None);
        // valkey-bloom reports its error rate too.
        let valkey = Value::Array(vec![
            bulk("Capacity"),
            Value::Int(100),
            bulk("Error rate"),
            bulk("0.01"),
            bulk("Expansion rate"),
            Value::Int(2),
        ]);
        assert_eq!(parse(&valkey).unwrap().error_rate, Some(0.01));
        assert!(parse(&Value::Int(1)).is_err());
    }
}
