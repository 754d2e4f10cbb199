//! Everything that talks to Redis and no kind owns: the executor, transactions with typed
//! replies, the parameters guard, what `clear` and `expire` do, and the steps on a filter kept
//! in one string per part (the checked delete, the whole read).

pub(crate) mod eviction;
pub(crate) mod exec;
pub(crate) mod guard;
pub(crate) mod lease;
pub(crate) mod once;
pub(crate) mod removal;
pub(crate) mod strings;
pub(crate) mod tx;
