//! Latency histograms merged per group (tool, test, transport, size) while documents are
//! read: each row's encoded histogram is decoded once, straight into its group, on the
//! reader thread that parsed it. A group's histogram holds a counts array of about 270 KB,
//! so what one document merges is bounded (`--max-input-bytes`'s companion ceiling on
//! latency groups), and the groups of every document are gathered into one set as each
//! document is read, not kept per document.

use std::collections::{BTreeMap, BTreeSet};

use results::{Document, LatencyHistogram};

/// Identifies the rows whose histograms merge: same tool, test, transport and size.
/// `transport` is the row's [`results::transport_label`] (`verbs+cuda` for GPU buffers), so
/// GPU and host figures never merge.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LatKey {
    pub tool: String,
    pub test: String,
    pub transport: String,
    pub size: u64,
}

impl LatKey {
    /// The group of one latency row of `doc`.
    pub fn of(doc: &Document, l: &results::LatencyResult) -> LatKey {
        LatKey {
            tool: doc.tool.clone(),
            test: l.test.clone(),
            transport: results::transport_label(&l.transport, l.memory.as_ref()),
            size: l.size_bytes,
        }
    }
}

/// Merged latency histograms, with the number of rows merged into each.
pub type LatencyGroups = BTreeMap<LatKey, (LatencyHistogram, usize)>;

/// One document's groups, merged row by row, at most `max` of them (a document names its
/// tool once, so the key here is (test, transport, size)).
#[derive(Default)]
pub(crate) struct Hists(Vec<(String, String, u64, LatencyHistogram, usize)>);

impl Hists {
    /// Adds one row's encoded histogram to its group; an empty encoding adds nothing.
    pub(crate) fn merge(
        &mut self,
        test: &str,
        transport: &str,
        size: u64,
        h: &str,
        max: usize,
    ) -> Result<(), String> {
        if h.is_empty() {
            return Ok(());
        }
        let at = match self
            .0
            .iter()
            .position(|(t, tr, s, _, _)| t == test && tr == transport && *s == size)
        {
            Some(i) => i,
            None if self.0.len() >= max => {
                return Err(format!(
                    "more than {max} distinct latency histogram groups (test, transport, size); \
                     are the sizes or test names corrupt?"
                ))
            }
            None => {
                self.0
                    .push((test.into(), transport.into(), size, Default::default(), 0));
                self.0.len() - 1
            }
        };
        self.0[at].3.merge_encoded(h).map_err(|e| e.to_string())?;
        self.0[at].4 += 1;
        Ok(())
    }

    /// The groups under `tool`'s keys, merged into `into`.
    pub(crate) fn into_groups(self, tool: &str, into: &mut LatencyGroups) {
        for (test, transport, size, h, n) in self.0 {
            let slot = into
                .entry(LatKey {
                    tool: tool.to_string(),
                    test,
                    transport,
                    size,
                })
                .or_default();
            slot.0.merge(&h);
            slot.1 += n;
        }
    }
}

/// The groups of every document of one command, gathered as each is read. Past `max`
/// distinct groups only the keys are counted (no histogram is kept for them), so the
/// run can be refused with the number it would have held.
#[derive(Default)]
pub(crate) struct Gathered {
    groups: LatencyGroups,
    over: BTreeSet<LatKey>,
}

impl Gathered {
    /// Adds one document's groups.
    pub(crate) fn add(&mut self, doc: LatencyGroups, max: usize) {
        for (k, (h, n)) in doc {
            if let Some(slot) = self.groups.get_mut(&k) {
                slot.0.merge(&h);
                slot.1 += n;
            } else if self.groups.len() < max {
                self.groups.insert(k, (h, n));
            } else {
                self.over.insert(k);
            }
        }
    }

    /// How many distinct groups the documents hold.
    pub(crate) fn distinct(&self) -> usize {
        self.groups.len() + self.over.len()
    }

    pub(crate) fn into_groups(self) -> LatencyGroups {
        self.groups
    }
}
