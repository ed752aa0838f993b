//! The `/v1` HTTP API: projects, databases, branches, endpoints and operations over the pageserver,
//! safekeepers and computes, with bearer keys and control metadata in SQLite. Built in issue 6.
