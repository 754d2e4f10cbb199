//! A window filter's info (the live generations of every part, by epoch, and the totals over
//! them) and its checked `clear` and `expire`: one script per part each.

use super::scripts::{call, Run, WINDOW_DROP, WINDOW_INFO};
use super::Window;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::info::{FilterInfo, GenerationInfo, KeyTtl, WindowInfo};
use crate::io::removal::Removal;
use crate::sizing::{current_fpr, estimate_items};
use redis::Value;
use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

/// The info script's reply for one part.
#[derive(Debug)]
pub struct PartInfo {
    /// The parameters' PTTL, as the part's script saw it (a filter of one key).
    params_pttl: i64,
    /// (epoch, bits set, bytes, PTTL) per live generation that exists.
    generations: Vec<(i64, u64, u64, i64)>,
}

/// One part's live generations (read-only; the parameters checked).
pub(super) async fn part_info<C: Conn>(ctx: Ctx<'_, C, Window>) -> Result<PartInfo> {
    let run = Run {
        script: &WINDOW_INFO,
        read_only: true,
        store: false,
        flags: false,
        step: None,
    };
    let reply = call(ctx, run, &[]).await?;
    parse(&reply).ok_or_else(|| Error::UnexpectedReply(format!("{reply:?} from window info")))
}

/// The filter's info from every part's: the generations of one epoch added up over the parts,
/// newest first; the TTL the parameters'.
pub(super) async fn info<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    parts: Vec<PartInfo>,
) -> Result<WindowInfo> {
    let window = ctx.kind();
    // A sharded filter's parameters are in a slot of their own: their TTL is read there.
    let mut params_ttl = None;
    if !ctx.inline() {
        let (exec, key) = (ctx.exec(), ctx.params().key());
        let pttl = redis::cmd("PTTL").arg(key).to_owned();
        let pttl: i64 = exec.retried(ctx.clock, || exec.query(key, &pttl)).await?;
        params_ttl = Some(pttl);
    }
    let mut generations: BTreeMap<i64, GenerationInfo> = BTreeMap::new();
    for part in parts {
        params_ttl = params_ttl.or(Some(part.params_pttl));
        for (epoch, bits_set, bytes, pttl) in part.generations {
            let start_ms = u64::try_from(epoch)
                .unwrap_or(0)
                .saturating_mul(window.window_ms)
                .div_ceil(u64::from(window.generations - 1));
            let entry = generations.entry(epoch).or_insert(GenerationInfo {
                start: UNIX_EPOCH + Duration::from_millis(start_ms),
                bits_set: 0,
                bytes: 0,
                ttl: KeyTtl::Missing,
            });
            entry.bits_set += bits_set;
            entry.bytes += bytes;
            entry.ttl = entry.ttl.longest_lived(KeyTtl::from_pttl(pttl));
        }
    }
    let Geometry { bits, hashes, .. } = window.geometry;
    let parts: Vec<GenerationInfo> = generations.into_values().rev().collect();
    // ln of the chance that no live generation answers "present" for an absent item (in
    // logs, so that rates far below 1e-16 do not round to 0).
    let miss: f64 = parts
        .iter()
        .map(|g| (-current_fpr(bits, hashes, g.bits_set)).ln_1p())
        .sum();
    let filter = FilterInfo {
        key: ctx.key().to_owned(),
        bits,
        hashes,
        bits_set: parts.iter().map(|g| g.bits_set).sum(),
        bytes: parts.iter().map(|g| g.bytes).sum(),
        estimated_items: parts
            .iter()
            .map(|g| estimate_items(bits, hashes, g.bits_set))
            .sum(),
        estimated_fpr: -miss.exp_m1(),
        ttl: KeyTtl::from_pttl(params_ttl.unwrap_or(-2)),
    };
    Ok(WindowInfo {
        filter,
        window: Duration::from_millis(window.window_ms),
        generations: window.generations,
        parts,
    })
}

/// `clear` or `expire` of the part's generations (and, for a filter of one key, of its
/// parameters), checked in the same script; whether a live generation existed.
pub(super) async fn drop_part<C: Conn>(ctx: Ctx<'_, C, Window>, how: Removal) -> Result<bool> {
    let run = Run {
        script: &WINDOW_DROP,
        read_only: false,
        store: false,
        flags: false,
        step: None,
    };
    let (op, millis) = how.args();
    match call(ctx, run, &[&op, &millis]).await? {
        Value::Int(n) => Ok(n > 0),
        other => Err(Error::UnexpectedReply(format!(
            "{other:?} from clear or expire"
        ))),
    }
}

fn parse(reply: &Value) -> Option<PartInfo> {
    let Value::Array(values) = reply else {
        return None;
    };
    let ints: Vec<i64> = values
        .iter()
        .skip(1)
        .map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (&[_now, params_pttl], rest) = ints.split_first_chunk::<2>()?;
    if rest.len() % 4 != 0 {
        return None;
    }
    let generations = rest
        .chunks_exact(4)
        .map(|g| {
            (
                g[0],
                u64::try_from(g[1]).unwrap_or(0),
                u64::try_from(g[2]).unwrap_or(0),
                g[3],
            )
        })
        .collect();
    Some(PartInfo {
        params_pttl,
        generations,
    })
}
