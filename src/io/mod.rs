//! Everything that talks to Redis: the executor, transactions with typed replies, the
//! parameters guard, and the steps on a key of bits.

pub(crate) mod bits;
pub(crate) mod exec;
pub(crate) mod guard;
pub(crate) mod tx;
