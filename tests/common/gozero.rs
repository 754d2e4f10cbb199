//! go-zero's `core/bloom` scripts (bloom.go), verbatim: the reference the tests compare against
//! and the per-item pattern `benches/peers.rs` measures.
#![allow(dead_code)]

/// go-zero's set script: `SETBIT` of every offset in `ARGV`, in order; replies nil.
pub const SET_SCRIPT: &str = r#"
for _, offset in ipairs(ARGV) do
	redis.call("setbit", KEYS[1], offset, 1)
end
"#;

/// go-zero's test script: false (nil) at the first 0 bit, else true (1).
pub const TEST_SCRIPT: &str = r#"
for _, offset in ipairs(ARGV) do
	if tonumber(redis.call("getbit", KEYS[1], offset)) == 0 then
		return false
	end
end
return true
"#;

/// What go-zero leaves after adding "hello" and "world" to a 64-bit filter (SPEC.md §1).
pub const HELLO_WORLD_64_BITS: [u8; 7] = [0xa5, 0x2c, 0x9b, 0x5a, 0xa0, 0x0a, 0x14];

/// What go-zero itself writes for one item: its set script over the item's `offsets` (sent as
/// decimal strings, as go-zero does), and nothing else.
pub async fn set(conn: &mut redis::aio::MultiplexedConnection, key: &str, offsets: &[u64]) {
    let offsets: Vec<String> = offsets.iter().map(u64::to_string).collect();
    let () = redis::Script::new(SET_SCRIPT)
        .key(key)
        .arg(offsets)
        .invoke_async(conn)
        .await
        .unwrap();
}
