"""Exceptions raised by muster: one class per libmuster error code.

Every exception is a muster.Error with .code (the muster_err value),
.retryable (whether the same call may succeed later: muster_err_retryable)
and .detail (the server's or the library's message for this failure).
Classes also derive from the closest builtin, so ``except TimeoutError``
and ``except ConnectionError`` work as expected.
"""


class Error(Exception):
    """A libmuster call failed; see .code, .retryable and .detail."""

    def __init__(self, message, code=None, retryable=False, detail=""):
        super().__init__(f"{message}: {detail}" if detail else message)
        self.message = message
        self.code = code
        self.retryable = bool(retryable)
        self.detail = detail


class NotFound(Error, KeyError):
    """The key is absent (MUSTER_ENOTFOUND)."""

    def __str__(self):
        return Exception.__str__(self)


class Timeout(Error, TimeoutError):
    """The deadline passed (MUSTER_ETIMEDOUT); retryable.  The message starts
    with "Timeout", the word torch's users and tests look for."""

    def __init__(self, message, code=None, retryable=False, detail=""):
        super().__init__(f"Timeout: {message}", code, retryable, detail)
        self.message = message


class BadRequest(Error, ValueError):
    """The server rejected a field of the request (MUSTER_EBADREQ)."""


class UnknownOp(Error):
    """The server does not know this operation (MUSTER_EUNKNOWNOP)."""


class Unauthenticated(Error, PermissionError):
    """Wrong token, or not authenticated (MUSTER_EAUTH)."""


class LimitExceeded(Error):
    """A server bound tripped: size, count, waiters (MUSTER_ELIMIT)."""


class ShuttingDown(Error):
    """The server is draining (MUSTER_ESHUTDOWN); retryable elsewhere or later."""


class NotANumber(Error, ValueError):
    """add() on a value that is not a decimal integer (MUSTER_ENOTNUM)."""


class Overflow(Error, OverflowError):
    """add() would overflow int64 (MUSTER_EOVERFLOW)."""


class Stale(Error):
    """The rendezvous generation ended: join again (MUSTER_ESTALE); retryable."""


class NotMember(Error):
    """A rendezvous call without membership (MUSTER_ENOTMEMBER)."""


class Conflict(Error):
    """Join parameters disagree with the round (MUSTER_ECONFLICT)."""


class Internal(Error):
    """A server-side bug (MUSTER_EINTERNAL)."""


class NotLeader(Error):
    """A standby answered; retry at the leader it names (MUSTER_ENOTLEADER)."""


class Excluded(Error):
    """This node was left out of the generation that replaced its own (a
    recovery round excluded it, or it asked after the generation was
    replaced): join again as a newcomer (MUSTER_EEXCLUDED)."""


class Forbidden(Error, PermissionError):
    """A write to a key of the job's world this connection may not make:
    muster/rdzv/ keys are musterd's, nccl/<g>/ and muster/run/<g>/ keys the
    members of generation g's and their workers' (MUSTER_EFORBIDDEN)."""


class InvalidArgument(Error, ValueError):
    """A bad argument to a library call (MUSTER_EINVAL)."""


class ConnectionLost(Error, ConnectionError):
    """Cannot connect, or the connection was lost (MUSTER_ECONN); retryable."""


class ProtocolError(Error):
    """The server sent something the library cannot parse (MUSTER_EPROTO)."""


class OutOfMemory(Error, MemoryError):
    """An allocation failed (MUSTER_ENOMEM)."""


class BadURL(Error, ValueError):
    """The store URL could not be parsed (MUSTER_EURL)."""


class Canceled(Error):
    """Aborted by a membership event (MUSTER_ECANCELED); retryable."""


#: muster_err value -> exception class.
BY_CODE = {
    1: NotFound, 2: Timeout, 3: BadRequest, 4: UnknownOp, 5: Unauthenticated, 6: LimitExceeded,
    7: ShuttingDown, 8: NotANumber, 9: Overflow, 10: Stale, 11: NotMember, 12: Conflict,
    13: Internal, 14: NotLeader, 15: Excluded, 16: Forbidden, 100: InvalidArgument, 101: ConnectionLost, 102: ProtocolError,
    103: OutOfMemory, 104: BadURL, 106: Canceled,
}

__all__ = ["Error", "BY_CODE"] + [cls.__name__ for cls in BY_CODE.values()]
