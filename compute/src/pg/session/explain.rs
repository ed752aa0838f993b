//! Errors explained: an I/O error by the store error behind it, a busy database by why it was busy, an
//! interrupt by who stopped it, a refusal by its reason.

use super::*;

impl Session {
    /// An error explained: an I/O error by the store error behind it (see the module doc), a busy database by
    /// why it was busy, an interrupt by who stopped it, a refusal by its reason; other errors unchanged.
    pub(super) fn explain(&mut self, error: SqlError) -> SqlError {
        match error.code {
            LOCK_NOT_AVAILABLE => {
                return match vfs::take_busy_reason() {
                    Some(BusyReason::StaleSnapshot) => SqlError::new(
                        SERIALIZATION_FAILURE,
                        "could not serialize access due to concurrent update: another transaction committed \
                         after this transaction's snapshot was taken; retry the transaction",
                    ),
                    _ => SqlError::new(
                        LOCK_NOT_AVAILABLE,
                        format!(
                            "could not obtain the write lock of database {} within {} s: another transaction is \
                             writing; retry",
                            self.database,
                            vfs::BUSY_TIMEOUT.as_secs()
                        ),
                    ),
                };
            }
            QUERY_CANCELED => {
                let message = match self.shared.stopped() {
                    Some(StopReason::Timeout) => "canceling statement due to statement timeout",
                    Some(StopReason::ClientGone) => "canceling statement: the client closed its connection",
                    _ => "canceling statement due to user request",
                };
                return SqlError::new(QUERY_CANCELED, message);
            }
            INSUFFICIENT_PRIVILEGE => {
                return match defend::take_refusal() {
                    Some(reason) => SqlError::new(INSUFFICIENT_PRIVILEGE, reason),
                    None => error,
                };
            }
            IO_ERROR => {}
            _ => return error,
        }
        let noted = vfs::take_store_error();
        if let Some(gone @ (PageStoreError::Closed { .. } | PageStoreError::Failed { .. })) = &noted {
            self.store_gone = Some(gone.clone());
        }
        match (&self.store_gone, noted) {
            (Some(PageStoreError::Closed { reason }), _) => SqlError::new(ADMIN_SHUTDOWN, reason.clone()),
            (Some(PageStoreError::Failed { reason }), _) => SqlError::new(
                CONNECTION_FAILURE,
                format!("the storage of database {} failed: {reason}; reconnect", self.database),
            ),
            (_, Some(too_large @ PageStoreError::TooLarge { .. })) => SqlError::new(
                PROGRAM_LIMIT_EXCEEDED,
                format!("transaction too large: {too_large}; nothing of it was committed"),
            ),
            (_, Some(other)) => SqlError::new(IO_ERROR, format!("{}: {other}", error.message)),
            (_, None) => error,
        }
    }
}
