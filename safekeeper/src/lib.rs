//! The safekeeper: makes WAL durable on a quorum of three (terms, votes, fsync before ack, group commit) and
//! streams committed WAL to the pageserver. Built in issue 3; DESIGN.md section 3 is its specification.
