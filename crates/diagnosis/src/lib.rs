//! `diagnosis`: what the judged results say about the fabric's parts. The node-by-node
//! matrix of a sweep (`matrix`), the suspects it names (`suspects`), the inventory and
//! audits compared across nodes (`inventory`, `audit`), the fabric's structure and cabling
//! against its plan (`structure`), the fabric under load (`load`), and tenants kept apart
//! (`isolation`) and from crowding each other out (`neighbours`).
//!
//! It stands on `verdict` (documents, rows, profiles, verdicts) and `results`, and knows
//! nothing of how a report is drawn or signed (`reports`).

pub mod audit;
pub mod inventory;
pub mod isolation;
pub mod load;
pub mod matrix;
pub mod neighbours;
pub mod structure;
pub mod suspects;
