"""The one exception type for user mistakes: caught at the stage boundary and printed as one line."""


class PipelineError(Exception):
    """A problem the user can fix (bad config value, missing file, corrupt input).

    The message names the cause and the fix; stage entry points print it without a traceback.
    """
