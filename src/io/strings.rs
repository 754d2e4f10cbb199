//! A filter kept in one string per part (plain bits, counting counters): the checked delete or
//! TTL of one part (`lua/drop.lua`).

use super::exec::Exec;
use super::guard::{self, Evidence, Guard};
use super::removal::Removal;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::layout::Layout;
use crate::scripts;
use redis::aio::ConnectionLike;
use redis::Value;

/// Deletes `key` (and the parameters, when `guard` lives in its slot group) or sets their TTL,
/// after checking in the same script that the key is a string no longer than `geometry`
/// holds and the stored parameters are this filter's. Whether the key existed.
pub(crate) async fn drop_checked<C>(
    exec: &Exec<C>,
    key: &str,
    guard: Option<&Guard>,
    geometry: Geometry,
    how: Removal,
) -> Result<bool>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    let mut keys = vec![key];
    keys.extend(guard.map(Guard::key));
    let (op, millis) = how.args();
    let fingerprint = guard.map_or("", Guard::fingerprint);
    let bare_bits_are_a_filter = match guard {
        Some(guard) if !guard.writes_foreign_strings() => "0",
        _ if geometry.layout == Layout::Native => "0",
        _ => "1",
    };
    let reply = exec
        .script(
            key,
            &scripts::DROP,
            &keys,
            &[
                &op,
                &millis,
                &fingerprint,
                &geometry.max_bytes(),
                &bare_bits_are_a_filter,
            ],
        )
        .await?;
    let evidence = match &reply {
        Value::Int(done) => return Ok(*done > 0),
        Value::Array(refusal) => match refusal.as_slice() {
            [Value::BulkString(what), Value::Int(bytes)] if what == b"length" => {
                Some(Evidence::Length(*bytes))
            }
            [Value::BulkString(what), Value::Int(bytes)] if what == b"bare" => {
                Some(Evidence::Foreign(*bytes))
            }
            _ => guard::refused_params(&reply).map(Evidence::Stored),
        },
        _ => None,
    };
    match (evidence, guard) {
        (Some(evidence), Some(guard)) => Err(guard.refusal(evidence)),
        (Some(Evidence::Length(bytes)), None) => {
            let requested = geometry.fingerprint(1);
            guard::check_length(key, geometry.bits, bytes, &requested).and(Err(
                Error::UnexpectedReply(format!("{reply:?} for {bytes} bytes")),
            ))
        }
        _ => Err(Error::UnexpectedReply(format!(
            "{reply:?} from clear or expire"
        ))),
    }
}
