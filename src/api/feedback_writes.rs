//! A shard's writes of feedback (`POST /v1/feedback`), grouped: every piece given while a
//! commit runs goes into the next one, so one durable commit of the feedback environment (an
//! fsync, a tenth of a millisecond and more) serves every request waiting for it, as the
//! journal groups checks.
//! At rest a piece commits at once. The commits run on the shard's blocking threads, never on
//! the reactor, one at a time per shard.
//!
//! The committer is a task of its own: a request that goes away (its connection closed) while
//! it waits takes nothing of the others' with it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures_channel::oneshot;

use crate::store::feedback::{FeedbackRecord, Given};
use crate::store::Store;

type Reply = oneshot::Sender<Result<FeedbackRecord, String>>;

#[derive(Default)]
pub struct FeedbackWrites {
    pending: RefCell<Vec<(Given, Reply)>>,
    committing: Cell<bool>,
}

impl FeedbackWrites {
    /// Merges `given` into the store with the next commit; the check's feedback as it then
    /// is, or why it could not be stored.
    pub async fn give(
        self: &Rc<Self>,
        store: &Store,
        given: Given,
    ) -> Result<FeedbackRecord, String> {
        let (reply, answer) = oneshot::channel();
        self.pending.borrow_mut().push((given, reply));
        if !self.committing.replace(true) {
            glommio::spawn_local(self.clone().commit_all(store.clone())).detach();
        }
        answer
            .await
            .map_err(|_| "the feedback committer stopped".to_owned())?
    }

    /// Commits what is pending, then what came meanwhile, until nothing is.
    async fn commit_all(self: Rc<Self>, store: Store) {
        loop {
            let batch = std::mem::take(&mut *self.pending.borrow_mut());
            if batch.is_empty() {
                break;
            }
            let (given, replies): (Vec<Given>, Vec<Reply>) = batch.into_iter().unzip();
            let writer = store.clone();
            let merged = glommio::executor()
                .spawn_blocking(move || writer.give_all_feedback(given))
                .await;
            match merged {
                Ok(records) => {
                    for (reply, record) in replies.into_iter().zip(records) {
                        let _ = reply.send(record);
                    }
                }
                Err(error) => {
                    let error = format!("{error:#}");
                    for reply in replies {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
            }
        }
        self.committing.set(false);
    }
}
