//! Group commit: single-item calls that arrive for a slot group while a step of theirs is in
//! flight there wait, and go together as the next step (one batch: one command or one script
//! call over all of them), so that many tasks calling one item at a time cost Redis what
//! batches cost.
//!
//! No timer: a call to a lane (one op on one part) goes at once when every active caller may
//! have a step of its own (nobody waits, and fewer items are in flight than the lane has
//! places: [`STEPS_IN_FLIGHT`] unless its kind says otherwise), so a lone call, or a few, go as
//! without group commit; else it waits. The caller that sends a step is its *leader*. When the
//! step returns, the leader answers each item's caller, then hands its place on to the callers
//! waiting: the first of them leads the next step with the others, up to a fair share (the
//! lane's callers, in flight or waiting, over its places, at most [`Lanes::max_items`] items),
//! and while callers are left and places are free, the next waiting caller leads another share.
//! Leads handed out together send their steps one turn of the scheduler apart (the n-th after
//! n turns): steps sent together reach the server in one read, are answered in one write, and
//! come back together, so the client made all the next steps while the server had none (a
//! convoy: 64 single native adds from 64 tasks left the server idle a fifth to a quarter of
//! the time, in lockstep rounds of four steps); apart, the server works on some while the
//! client answers the others.
//! No task runs steps for others after its own answer but the one step it leads. A caller whose
//! deadline passes while it waits is withdrawn (nothing of it was sent: [`Error::Deadline`]);
//! one whose item went in a step that has not answered gets [`Error::OutcomeUnknown`] while the
//! step goes on for the others. A leader whose call is dropped mid-step hands the lane on as it
//! goes: the callers of its step get `OutcomeUnknown` (wait again, when it was not sent yet),
//! and the next waiting caller leads.

use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Steps a lane keeps in flight at most, for every kind: one step alone leaves the server idle
/// while its reply travels and the next step is made; a few, sent apart, keep it busy, as a
/// few concurrent batches do; more cost the server more per item (each step is one script
/// call, whose own cost its items share: about 16 µs against 8 µs per item of a native add,
/// Redis 7.0.15). BENCHMARKS.md "Group commit" has the figures for 2 to 8 (with steps sent
/// apart, 2 or 4 did best for plain filters; a window or growing filter, whose every step is a
/// script with a large cost of its own, keeps 2: `Seam::STEPS_IN_FLIGHT`).
pub(crate) const STEPS_IN_FLIGHT: usize = 4;

/// A waiting caller's item not yet taken into a step.
const WAITING: u8 = 0;
/// Taken into a step: its outcome is the step's.
const TAKEN: u8 = 1;
/// Its caller gave up (deadline) before it was taken.
const WITHDRAWN: u8 = 2;

/// The lanes of one filter: one per op and part.
#[derive(Debug)]
pub(crate) struct Lanes {
    lanes: Vec<Mutex<Lane>>,
    /// The most items one step carries.
    max_items: usize,
    /// The most steps a lane has in flight.
    depth: usize,
}

#[derive(Debug, Default)]
struct Lane {
    /// Steps in flight (or about to be) for this lane, at most its lanes' depth.
    in_flight: usize,
    /// The items those steps carry.
    items: usize,
    /// Leads handed out whose steps have not been sent yet.
    unsent: usize,
    waiting: VecDeque<Waiter>,
}

/// A caller waiting in a lane.
#[derive(Debug)]
pub(crate) struct Waiter {
    item: Vec<u8>,
    state: Arc<AtomicU8>,
    turn: oneshot::Sender<Turn>,
}

/// What a waiting caller is told.
#[derive(Debug)]
enum Turn {
    /// Its answer, from a step another caller led.
    Answer(Result<bool>),
    /// It leads the next step, with these callers' items after its own, sent after `after`
    /// turns of the scheduler (the leads handed out before it and not sent yet).
    Lead { others: Vec<Waiter>, after: usize },
}

impl Lanes {
    /// `ops` ops on each of `parts` parts, at most `max_items` items per step and `depth` steps
    /// in flight per lane ([`STEPS_IN_FLIGHT`] for a filter).
    pub(crate) fn new(ops: usize, parts: usize, max_items: usize, depth: usize) -> Self {
        Lanes {
            lanes: (0..ops * parts).map(|_| Mutex::default()).collect(),
            max_items: max_items.max(1),
            depth: depth.max(1),
        }
    }

    /// `item`'s answer from a step of lane `lane` (`lane` < ops × parts), which `step` sends
    /// (with the items of every caller of the lane waiting when it goes); `deadline` is when
    /// this caller gives up, and `timeout` what its [`Error::Deadline`] names; `key` names the
    /// filter in an [`Error::OutcomeUnknown`].
    pub(crate) async fn call<F, Fut>(
        &self,
        lane: usize,
        item: &[u8],
        (deadline, timeout): (Option<Instant>, std::time::Duration),
        key: &str,
        step: F,
    ) -> Result<bool>
    where
        F: Fn(Vec<Vec<u8>>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<bool>>>,
    {
        let lane = &self.lanes[lane];
        let (others, after) = {
            if let Some((rx, taken)) = enter(lane, item, self.depth) {
                let mut waiting = Waiting {
                    lanes: self,
                    lane,
                    rx,
                    done: false,
                };
                let turn = match deadline {
                    None => Some((&mut waiting.rx).await),
                    Some(at) => tokio::time::timeout_at(at, &mut waiting.rx).await.ok(),
                };
                waiting.done = true;
                match turn {
                    Some(Ok(Turn::Answer(answer))) => return answer,
                    Some(Ok(Turn::Lead { others, after })) => (others, Some(after)),
                    // The leader's call was dropped with this item in its step.
                    Some(Err(_)) => return Err(unknown(key)),
                    None => {
                        // The deadline: no turn may come any more; one that came meanwhile
                        // is taken as it is.
                        waiting.rx.close();
                        match waiting.rx.try_recv() {
                            Ok(Turn::Answer(answer)) => return answer,
                            Ok(Turn::Lead { others, .. }) => {
                                self.give_back(lane, others);
                                return Err(Error::Deadline(timeout));
                            }
                            Err(_) => {}
                        }
                        let withdrawn = taken.compare_exchange(
                            WAITING,
                            WITHDRAWN,
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        );
                        return match withdrawn {
                            Ok(_) => Err(Error::Deadline(timeout)),
                            Err(_) => Err(unknown(key)),
                        };
                    }
                }
            } else {
                (Vec::new(), None)
            }
        };
        let mut lead = Lead {
            lanes: self,
            lane,
            count: others.len() + 1,
            others,
            unsent: after.is_some(),
        };
        if let Some(after) = after {
            // Leads handed out together go one turn of the scheduler apart, so that their
            // steps reach the server apart (module docs: no convoy).
            for _ in 0..after {
                tokio::task::yield_now().await;
            }
            lead.unsent = false;
            let mut state = lock(lane);
            debug_assert!(state.unsent > 0, "a lead sent that was not counted unsent");
            state.unsent = state.unsent.saturating_sub(1);
        }
        let mut items = Vec::with_capacity(lead.others.len() + 1);
        items.push(item.to_vec());
        // Moved, not copied: a waiter taken into a step never goes back to the queue.
        items.extend(lead.others.iter_mut().map(|w| std::mem::take(&mut w.item)));
        let answers = step(items).await;
        // Its callers are about to be answered, and may call again before the lane is handed
        // on: no longer counted in flight.
        lock(lane).items -= std::mem::take(&mut lead.count);
        let others = std::mem::take(&mut lead.others);
        let mine = match answers {
            Ok(answers) => {
                for (waiter, answer) in others.into_iter().zip(answers.iter().skip(1)) {
                    let _ = waiter.turn.send(Turn::Answer(Ok(*answer)));
                }
                answers.first().copied().ok_or_else(|| {
                    Error::UnexpectedReply("no answer for a grouped step".to_owned())
                })
            }
            Err(err) => {
                for waiter in others {
                    let _ = waiter.turn.send(Turn::Answer(Err(err.duplicate())));
                }
                Err(err)
            }
        };
        // The callers just answered run first, and those that call again join the next step.
        tokio::task::yield_now().await;
        drop(lead);
        mine
    }

    /// A step of `count` items is over (or its leader's call was dropped): its place goes on
    /// ([`hand_on_locked`](Lanes::hand_on_locked)).
    fn hand_on(&self, lane: &Mutex<Lane>, count: usize) {
        let mut state = lock(lane);
        state.items -= count;
        self.hand_on_locked(&mut state);
    }

    /// Hands on a lane whose step is over (its items no longer counted): its place, and any
    /// other free one, goes to the callers waiting, a fair share each (the active callers, in
    /// flight or waiting, over the lane's depth), so that the steps come to carry as many
    /// items each. Taking all that wait into one step would keep the sizes the steps first
    /// had: with 64 callers and 8 places, seven steps of one item each (first callers, which
    /// found the lane free) beside one of 56, for good; the single-item steps each cost the
    /// server a script call.
    fn hand_on_locked(&self, state: &mut Lane) {
        state.in_flight -= 1;
        while state.in_flight < self.depth {
            let mut taken = Vec::new();
            let share = (state.items + state.waiting.len())
                .div_ceil(self.depth)
                .clamp(1, self.max_items);
            while taken.len() < share {
                let Some(waiter) = state.waiting.pop_front() else {
                    break;
                };
                let took = waiter.state.compare_exchange(
                    WAITING,
                    TAKEN,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                if took.is_ok() {
                    taken.push(waiter);
                }
            }
            if taken.is_empty() {
                return;
            }
            let leader = taken.remove(0);
            let count = taken.len() + 1;
            let lead = Turn::Lead {
                others: taken,
                after: state.unsent,
            };
            match leader.turn.send(lead) {
                Ok(()) => {
                    state.in_flight += 1;
                    state.items += count;
                    state.unsent += 1;
                }
                // Its caller is gone: the others go back to the front of the queue, for the
                // next one.
                Err(Turn::Lead { others: back, .. }) => requeue(state, back),
                Err(Turn::Answer(_)) => unreachable!("a Lead was sent"),
            }
        }
    }

    /// A lead that came to a caller that gave up (or was dropped) before sending its step:
    /// its callers go back to the front of the queue and the lane goes on.
    fn give_back(&self, lane: &Mutex<Lane>, others: Vec<Waiter>) {
        let mut state = lock(lane);
        debug_assert!(
            state.unsent > 0,
            "a lead given back that was not counted unsent"
        );
        state.unsent = state.unsent.saturating_sub(1);
        state.items -= others.len() + 1;
        requeue(&mut state, others);
        self.hand_on_locked(&mut state);
    }
}

/// `back` (taken, in queue order) to the front of the queue, waiting again.
fn requeue(state: &mut Lane, back: Vec<Waiter>) {
    for waiter in back.into_iter().rev() {
        waiter.state.store(WAITING, Ordering::Release);
        state.waiting.push_front(waiter);
    }
}

/// A caller waiting for its turn: when its call is dropped before the turn is taken, a lead
/// sent to it meanwhile is given back, so that the lane goes on.
struct Waiting<'a> {
    lanes: &'a Lanes,
    lane: &'a Mutex<Lane>,
    rx: oneshot::Receiver<Turn>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.rx.close();
        if let Ok(Turn::Lead { others, .. }) = self.rx.try_recv() {
            self.lanes.give_back(self.lane, others);
        }
    }
}

/// The lane while its leader's step runs: handed on when dropped, whether the step returned
/// or the leader's call was dropped (then the callers of its step, told nothing, get
/// [`Error::OutcomeUnknown`]; those of a step not sent yet wait again).
struct Lead<'a> {
    lanes: &'a Lanes,
    lane: &'a Mutex<Lane>,
    /// The items of its step (its own and the others').
    count: usize,
    others: Vec<Waiter>,
    /// A lead handed out, its step not sent yet.
    unsent: bool,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let others = std::mem::take(&mut self.others);
        if self.unsent {
            self.lanes.give_back(self.lane, others);
            return;
        }
        drop(others);
        self.lanes.hand_on(self.lane, self.count);
    }
}

/// Takes a place in the lane (`None`) when every active caller may have one of its own: nobody
/// waits, and fewer items than `depth` are in flight (a fair share is one item); else queues
/// `item` and returns what its caller waits on.
fn enter(
    lane: &Mutex<Lane>,
    item: &[u8],
    depth: usize,
) -> Option<(oneshot::Receiver<Turn>, Arc<AtomicU8>)> {
    let mut state = lock(lane);
    if state.waiting.is_empty() && state.items < depth {
        state.in_flight += 1;
        state.items += 1;
        return None;
    }
    let (tx, rx) = oneshot::channel();
    let taken = Arc::new(AtomicU8::new(WAITING));
    state.waiting.push_back(Waiter {
        item: item.to_vec(),
        state: taken.clone(),
        turn: tx,
    });
    Some((rx, taken))
}

fn unknown(key: &str) -> Error {
    Error::OutcomeUnknown {
        key: key.to_owned(),
        step: "the call that carried this item's step was dropped before its reply".to_owned(),
    }
}

fn lock(lane: &Mutex<Lane>) -> std::sync::MutexGuard<'_, Lane> {
    lane.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The queue alone, with a step that records what it is sent: Redis's part is tested in
    /// tests/group_commit.rs.
    #[tokio::test]
    async fn a_caller_past_its_deadline_is_withdrawn_and_never_sent() {
        let lanes = Lanes::new(1, 1, 100, 1);
        let (sent, gate) = (Mutex::default(), tokio::sync::Notify::new());
        let step = |items| gated(&sent, &gate, 1, items);
        let forever = (None, Duration::ZERO);
        let leader = lanes.call(0, b"a", forever, "k", step);
        // c waits first, then b, whose deadline passes while a's step runs.
        let later = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            lanes.call(0, b"c", forever, "k", step).await
        };
        let withdrawn = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let soon = Instant::now() + Duration::from_millis(20);
            let timeout = Duration::from_millis(20);
            let withdrawn = lanes.call(0, b"b", (Some(soon), timeout), "k", step).await;
            assert!(
                matches!(withdrawn, Err(Error::Deadline(_))),
                "{withdrawn:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            gate.notify_one();
        };
        let others = async { tokio::join!(later, withdrawn).0 };
        let (led, later) = tokio::join!(leader, others);
        assert!(led.unwrap() && later.unwrap());
        let sent = sent.into_inner().unwrap();
        assert_eq!(
            sent,
            [vec![b"a".to_vec()], vec![b"c".to_vec()]],
            "b was never sent"
        );
    }

    /// A step that records its items in `sent`, the first `held` steps answering only once
    /// `gate` is notified.
    async fn gated(
        sent: &Mutex<Vec<Vec<Vec<u8>>>>,
        gate: &tokio::sync::Notify,
        held: usize,
        items: Vec<Vec<u8>>,
    ) -> Result<Vec<bool>> {
        let hold = {
            let mut sent = sent.lock().unwrap();
            sent.push(items.clone());
            sent.len() <= held
        };
        if hold {
            gate.notified().await;
        }
        Ok(vec![true; items.len()])
    }

    /// `callers` callers on a lane of 4 places, each calling `calls` times, again as soon as
    /// it is answered; every step takes 1 ms. The steps' sizes, in the order they went.
    async fn closed_loop(callers: u8, calls: usize) -> Vec<usize> {
        let steps = closed_loop_turns(callers, calls).await;
        steps.into_iter().map(|(size, _)| size).collect()
    }

    /// [`closed_loop`], each step's size with the turn of the scheduler it was sent in (the
    /// callers' task's polls).
    async fn closed_loop_turns(callers: u8, calls: usize) -> Vec<(usize, u64)> {
        let lanes = Lanes::new(1, 1, 1000, 4);
        let turns = std::sync::atomic::AtomicU64::new(0);
        let sizes = Mutex::new(Vec::<(usize, u64)>::new());
        let step = |items: Vec<Vec<u8>>| {
            let (sizes, turns) = (&sizes, &turns);
            async move {
                let turn = turns.load(Ordering::Relaxed);
                sizes.lock().unwrap().push((items.len(), turn));
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok(vec![true; items.len()])
            }
        };
        let forever = (None, Duration::ZERO);
        let callers = (0..callers).map(|i| {
            let (step, lanes) = (&step, &lanes);
            async move {
                for _ in 0..calls {
                    assert!(lanes.call(0, &[i], forever, "k", step).await.unwrap());
                }
            }
        });
        let mut all = Box::pin(futures_util::future::join_all(callers));
        std::future::poll_fn(|cx| {
            turns.fetch_add(1, Ordering::Relaxed);
            std::future::Future::poll(all.as_mut(), cx)
        })
        .await;
        drop(all);
        sizes.into_inner().unwrap()
    }

    /// Steps whose places free together (all four return in the same instant) are sent one
    /// turn of the scheduler apart, not together: sent together, they would reach the server
    /// in one read and come back together, for good (a convoy).
    #[tokio::test(start_paused = true)]
    async fn steps_handed_on_together_go_apart() {
        let steps = closed_loop_turns(64, 20).await;
        let later = &steps[8..steps.len() / 2];
        let mut turns: Vec<u64> = later.iter().map(|&(_, turn)| turn).collect();
        turns.dedup();
        assert_eq!(turns.len(), later.len(), "steps and their turns: {later:?}");
    }

    /// 64 callers calling again as soon as they are answered, on a lane of 4 steps in flight:
    /// the steps come to carry as many items each (16), where taking all that wait into one
    /// step kept the sizes of the first steps for good (three of one item beside one of 61).
    #[tokio::test(start_paused = true)]
    async fn steps_come_to_carry_fair_shares() {
        let sizes = closed_loop(64, 100).await;
        assert_eq!(sizes.iter().sum::<usize>(), 6400);
        // Past the first round of steps, every step carries about a quarter of the callers
        // (until the callers start to finish: a step's leader calls again after the steps it
        // handed its place to, and so lags one step behind the others of its step).
        let later = &sizes[8..sizes.len() / 2];
        assert!(
            later.iter().all(|&n| (12..=20).contains(&n)),
            "step sizes {later:?}"
        );
    }

    /// Fewer callers than places: each goes at once in a step of its own, all in flight
    /// together, as without group commit (none waits for another's step to return).
    #[tokio::test(start_paused = true)]
    async fn fewer_callers_than_places_go_at_once() {
        let started = Instant::now();
        let sizes = closed_loop(3, 10).await;
        assert_eq!(sizes, [1; 30]);
        let took = started.elapsed();
        assert!(took < Duration::from_millis(12), "{took:?} for 10 rounds");
    }

    /// A leader whose call is dropped while it waits its turn to send (a lead handed out
    /// while others were unsent) sent nothing: the callers of its step wait again and go with
    /// the next leader, answered (not `OutcomeUnknown`), and the lane goes on.
    #[tokio::test(start_paused = true)]
    async fn a_lead_dropped_before_it_is_sent_gives_its_callers_back() {
        let lanes = Lanes::new(1, 1, 100, 3);
        let (sent, gate) = (Mutex::default(), tokio::sync::Notify::new());
        let step = |items| gated(&sent, &gate, 3, items);
        let forever = (None, Duration::ZERO);
        let caller = |item: u8, after: u64| {
            let (lanes, step) = (&lanes, &step);
            async move {
                tokio::time::sleep(Duration::from_millis(after)).await;
                lanes.call(0, &[item], forever, "k", step).await
            }
        };
        // a, b and x go at once (three places) and return together; c to h wait, in order,
        // and go as three shares: c with d, e with f one turn later, g with h two turns later.
        // g's call is dropped when e's step is sent: g has its lead, and has not sent.
        let g = async {
            let call = caller(b'g', 7);
            let e_sent = std::future::poll_fn(|_| match sent.lock().unwrap().len() >= 5 {
                true => std::task::Poll::Ready(()),
                false => std::task::Poll::Pending,
            });
            tokio::select! {
                biased;
                () = e_sent => None,
                answer = call => Some(answer),
            }
        };
        let release = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            gate.notify_waiters();
        };
        // Polled in this order each time: the leaders hand on before the others look.
        let (a, b, x, c, d, e, f, g, h, ()) = futures_util::join!(
            caller(b'a', 0),
            caller(b'b', 0),
            caller(b'x', 0),
            caller(b'c', 3),
            caller(b'd', 4),
            caller(b'e', 5),
            caller(b'f', 6),
            g,
            caller(b'h', 8),
            release
        );
        assert!(g.is_none(), "g was to be dropped before sending: {g:?}");
        for answer in [a, b, x, c, d, e, f, h] {
            assert!(matches!(answer, Ok(true)), "{answer:?}");
        }
        let sent: Vec<Vec<u8>> = (sent.into_inner().unwrap().into_iter())
            .map(|step| step.iter().map(|item| item[0]).collect())
            .collect();
        let expected: [&[u8]; 6] = [b"a", b"b", b"x", b"cd", b"ef", b"h"];
        assert_eq!(
            sent, expected,
            "g never sent, h sent after it was given back"
        );
    }

    /// Callers waiting behind a step go together as the next one, each with its own answer.
    #[tokio::test]
    async fn waiting_callers_go_as_one_step() {
        let lanes = Lanes::new(1, 1, 100, 1);
        let steps = Mutex::new(Vec::<usize>::new());
        let step = |items: Vec<Vec<u8>>| {
            let steps = &steps;
            async move {
                steps.lock().unwrap().push(items.len());
                tokio::time::sleep(Duration::from_millis(20)).await;
                // "new" for even items.
                Ok(items.iter().map(|item| item[0] % 2 == 0).collect())
            }
        };
        let forever = (None, Duration::ZERO);
        let calls = (0u8..10).map(|i| {
            let step = &step;
            let lanes = &lanes;
            async move {
                tokio::time::sleep(Duration::from_millis(u64::from(i.min(1)) * 5)).await;
                (i, lanes.call(0, &[i], forever, "k", step).await.unwrap())
            }
        });
        for (i, answer) in futures_util::future::join_all(calls).await {
            assert_eq!(answer, i % 2 == 0, "item {i}");
        }
        assert_eq!(steps.into_inner().unwrap(), [1, 9]);
    }
}
