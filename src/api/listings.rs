//! `GET /v1/workflows`'s answers, kept per shard until the workflows change.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use serde::Serialize;

use super::envelope::json_response;
use crate::hash::FastMap;
use crate::http::response::Response;
use crate::store::records::WorkflowRecord;
use crate::store::view::Workflows;

#[derive(Serialize)]
struct WorkflowList<'a> {
    status: &'static str,
    workflows: Vec<WorkflowVersion<'a>>,
}

#[derive(Serialize)]
struct WorkflowVersion<'a> {
    name: &'a str,
    version: u64,
}

/// Distinct listings a shard keeps before it starts over (bounds their memory).
pub const LISTINGS_KEPT: usize = 64;

/// The listing bodies a shard wrote, kept until the workflows change.
///
/// A listing depends only on the workflows' records and on which of them the caller may use,
/// so one body serves every caller that may use the same ones (keys with the same allow-list,
/// scopes and plan): bodies are kept by that set, a bit per workflow in the map's order. When
/// [`super::context::Context::workflows`] gives another map (the store changed), every body is dropped. With
/// more than 64 workflows, a set does not fit a bit each and listings are written afresh.
#[derive(Default)]
pub struct Listings {
    kept: RefCell<Kept>,
}

#[derive(Default)]
struct Kept {
    /// The map the bodies were written from. Weak, so an old map's records are not kept
    /// alive; its allocation is, so no later map can take its address and pass for it.
    of: Weak<Workflows>,
    bodies: FastMap<u64, Box<[u8]>>,
}

impl Listings {
    /// The answer listing the workflows `may_use` admits.
    pub(super) fn answer(
        &self,
        workflows: &Rc<Workflows>,
        may_use: impl Fn(&WorkflowRecord) -> bool,
    ) -> Response {
        let Some(set) = usable_set(workflows, &may_use) else {
            return listing(workflows.values().filter(|workflow| may_use(workflow)));
        };
        let mut kept = self.kept.borrow_mut();
        if kept.of.as_ptr() != Rc::as_ptr(workflows) {
            *kept = Kept {
                of: Rc::downgrade(workflows),
                bodies: FastMap::default(),
            };
        }
        if let Some(body) = kept.bodies.get(&set) {
            return Response::json(200, body.to_vec());
        }
        // Written from the set itself, so a kept body is what its key says.
        let in_set = |(bit, workflow): (usize, _)| (set & 1 << bit != 0).then_some(workflow);
        let response = listing(workflows.values().enumerate().filter_map(in_set));
        if response.status == 200 {
            if kept.bodies.len() >= LISTINGS_KEPT {
                kept.bodies.clear();
            }
            kept.bodies
                .insert(set, response.body.to_vec().into_boxed_slice());
        }
        response
    }
}

/// The workflows `may_use` admits, a bit each in the map's order; `None` past 64 workflows.
fn usable_set(workflows: &Workflows, may_use: impl Fn(&WorkflowRecord) -> bool) -> Option<u64> {
    if workflows.len() > u64::BITS as usize {
        return None;
    }
    let set = workflows
        .values()
        .enumerate()
        .filter(|(_, workflow)| may_use(workflow))
        .fold(0, |set, (bit, _)| set | 1 << bit);
    Some(set)
}

/// The listing of `listed`, serialised.
pub(super) fn listing<'a>(listed: impl Iterator<Item = &'a Rc<WorkflowRecord>>) -> Response {
    let listed = listed
        .map(|workflow| WorkflowVersion {
            name: &workflow.name,
            version: workflow.version,
        })
        .collect();
    json_response(
        200,
        &WorkflowList {
            status: "success",
            workflows: listed,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Workflows of these names and versions (all with the same text check).
    fn workflows(versions: &[(String, u64)]) -> Rc<Workflows> {
        let defs = crate::workflow::parse_workflows(
            "[workflows.x]\ndescription = \"x\"\ntext_checks = [\"pii\"]\n",
        )
        .unwrap();
        let record = |(name, version): &(String, u64)| WorkflowRecord {
            name: name.clone(),
            version: *version,
            digest: [0; 32],
            definition: defs["x"].clone(),
            updated_ms: 0,
        };
        let map = versions.iter().map(|v| (v.0.clone(), Rc::new(record(v))));
        Rc::new(map.collect())
    }

    fn named(count: usize, version: u64) -> Vec<(String, u64)> {
        (0..count).map(|i| (format!("w{i:02}"), version)).collect()
    }

    fn listed(response: &Response) -> Vec<(String, u64)> {
        assert_eq!(response.status, 200);
        let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body["status"], "success");
        let entry = |w: &serde_json::Value| {
            let name = w["name"].as_str().unwrap().to_owned();
            (name, w["version"].as_u64().unwrap())
        };
        body["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .map(entry)
            .collect()
    }

    fn kept(listings: &Listings) -> usize {
        listings.kept.borrow().bodies.len()
    }

    #[test]
    fn a_kept_listing_is_the_one_written_afresh() {
        let listings = Listings::default();
        let map = workflows(&named(5, 3));
        type Filter = fn(&WorkflowRecord) -> bool;
        let filters: [(&str, Filter); 4] = [
            ("all", |_| true),
            ("none", |_| false),
            ("w03", |w| w.name == "w03"),
            ("not w00", |w| w.name != "w00"),
        ];
        for round in 0..2 {
            for (i, (what, filter)) in filters.iter().enumerate() {
                let fresh = listing(map.values().filter(|w| filter(w)));
                let answer = listings.answer(&map, filter);
                assert_eq!(answer.body, fresh.body, "{what}, round {round}");
                assert_eq!(answer.content_type, fresh.content_type);
                let expected = map.values().filter(|w| filter(w));
                let expected: Vec<_> = expected.map(|w| (w.name.clone(), 3)).collect();
                assert_eq!(listed(&answer), expected, "{what}");
                // One body per set, written once.
                assert_eq!(kept(&listings), if round == 0 { i + 1 } else { 4 });
            }
        }
    }

    #[test]
    fn listings_are_dropped_when_the_workflows_change() {
        let listings = Listings::default();
        let old = workflows(&named(3, 1));
        assert_eq!(listed(&listings.answer(&old, |_| true)), named(3, 1));
        // The store changed: the old map goes (its records with it) and a new one is read,
        // with the same names. Its listing must not be the old one's.
        drop(old);
        let new = workflows(&named(3, 2));
        assert_eq!(listed(&listings.answer(&new, |_| true)), named(3, 2));
        let fewer = workflows(&named(2, 2));
        assert_eq!(listed(&listings.answer(&fewer, |_| true)), named(2, 2));
        assert_eq!(kept(&listings), 1);
    }

    #[test]
    fn more_than_64_workflows_are_listed_without_keeping() {
        let listings = Listings::default();
        let map = workflows(&named(65, 1));
        let odd = |w: &WorkflowRecord| w.name.ends_with(['1', '3', '5', '7', '9']);
        let answer = listings.answer(&map, odd);
        assert_eq!(listed(&answer).len(), 32);
        assert_eq!(answer.body, listing(map.values().filter(|w| odd(w))).body);
        assert_eq!(kept(&listings), 0);
        // At 64, each set is kept.
        let map = workflows(&named(64, 1));
        assert_eq!(listed(&listings.answer(&map, odd)).len(), 32);
        assert_eq!(kept(&listings), 1);
    }

    #[test]
    fn the_kept_listings_are_bounded() {
        let listings = Listings::default();
        let map = workflows(&named(10, 1));
        // 200 of the 1,024 sets of ten workflows; each listing names the workflows of its set.
        for set in 0..200u64 {
            let names: Vec<String> = (0..10)
                .filter(|bit| set & 1 << bit != 0)
                .map(|bit| format!("w{bit:02}"))
                .collect();
            let answer = listings.answer(&map, |w| names.contains(&w.name));
            let got: Vec<String> = listed(&answer).into_iter().map(|(n, _)| n).collect();
            assert_eq!(got, names);
            assert!(kept(&listings) <= LISTINGS_KEPT);
        }
    }
}
