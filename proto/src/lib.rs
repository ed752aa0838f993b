//! Wire contracts: the `.proto` files and the tonic/prost code generated from them (with `protox`, no system
//! `protoc`) for the page service and the safekeeper service. Filled in with the safekeeper (issue 3) and the
//! pageserver (issue 4).
