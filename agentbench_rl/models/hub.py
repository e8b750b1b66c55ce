"""Whether a model can be loaded before a load that would otherwise retry for a minute
(transformers' downloads back off five times, printing a line each, when the hub is away)."""

from __future__ import annotations

from pathlib import Path


def check_loadable(model: str) -> None:
    """``ValueError`` in one line, at once, for a model that is neither a folder here nor in
    the Hugging Face cache and cannot be downloaded either (``HF_HUB_OFFLINE`` set, or the hub
    not reachable: :func:`hub_reachable`). A name that is not a repository id passes: the
    loader names that problem itself.

    Example:
        >>> check_loadable(".")  # a folder here
    """
    from huggingface_hub import constants, try_to_load_from_cache

    if Path(model).expanduser().exists():
        return
    try:
        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return
    except ValueError:
        return
    where = f"model '{model}' is neither a folder here nor in the Hugging Face cache"
    if constants.HF_HUB_OFFLINE:
        raise ValueError(f"{where}, and HF_HUB_OFFLINE is set: download it or give its folder")
    reachable, reason = hub_reachable()
    if not reachable:
        raise ValueError(f"{where}, and {constants.ENDPOINT} cannot be reached ({reason})")


def hub_reachable(timeout: float = 5.0) -> tuple[bool, str]:
    """Whether the hub (``HF_ENDPOINT``'s, huggingface.co by default) answers at all within
    ``timeout``, and why not: any HTTP answer counts (a gated model's 401 still means the hub
    is there).

    Example:
        >>> from huggingface_hub import constants
        >>> saved, constants.ENDPOINT = constants.ENDPOINT, "http://127.0.0.1:9"
        >>> hub_reachable(timeout=2.0)[0]
        False
        >>> constants.ENDPOINT = saved
    """
    import urllib.error
    import urllib.request

    from huggingface_hub import constants

    try:
        urllib.request.urlopen(constants.ENDPOINT, timeout=timeout).close()
    except urllib.error.HTTPError:
        return True, ""
    except (OSError, ValueError) as error:
        return False, str(getattr(error, "reason", error))
    return True, ""
