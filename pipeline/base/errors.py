"""The one exception type for user mistakes: caught at the stage boundary and printed as one line."""


class PipelineError(Exception):
    """A problem the user can fix (bad config value, missing file, corrupt input).

    The message names the cause and the fix; stage entry points print it without a traceback.
    """


def environment_error(exc: BaseException) -> str | None:
    """One message naming the cause and the fix for an OSError the machine causes, not the code (a full disk, a
    read-only or unwritable folder); None for any other exception (a bug keeps its traceback)."""
    import errno

    if not isinstance(exc, OSError) or exc.errno is None:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the device{where}. Fix: free disk space there (`df -h` shows how much is left)"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"cannot write{where}: {exc.strerror}. Fix: make it writable (e.g. `chmod u+w`), or run elsewhere"
    return None
