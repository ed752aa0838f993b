//! The pageserver: serves pages of any branch at any LSN over gRPC from the storage engine, ingests WAL from
//! the safekeepers, runs flush, compaction, GC and upload to object storage. Built in issue 4.
