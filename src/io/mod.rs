//! Everything that talks to Redis: the executor, transactions with typed replies, the
//! parameters guard, the steps on a key of bits, and large batches on large keys by ranges.

pub(crate) mod bits;
pub(crate) mod exec;
pub(crate) mod guard;
pub(crate) mod ranges;
pub(crate) mod tx;
