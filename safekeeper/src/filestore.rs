//! File-backed WAL segments and control file for the acceptor (being written).
