"""``worker``: run a consumer that an application module defines, until SIGTERM or Ctrl-C.

``pgque worker MODULE:ATTR`` imports MODULE (the current directory first on
``sys.path``, as ``python -m`` would have it), takes ATTR from it (a
consumer, or a function of no arguments returning one), applies
``--concurrency``, configures logging and calls the consumer's own
``start()``: its signal handling gives the documented drain (the batch in
progress finishes, at most ``shutdown_timeout``; a second signal stops at
once). The consumer connects with the DSN it was built with.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import reprlib
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from pgque.async_consumer import AsyncConsumer
from pgque.async_multi_consumer import AsyncMultiQueueConsumer
from pgque.cli._command import command, settings
from pgque.cli._errors import CliError, ExitCode, first_line
from pgque.consumer import Consumer
from pgque.errors import (
    PgqueConnectionError,
    PgqueConsumerNotFound,
    PgqueError,
    PgqueInvalidArgument,
    PgqueNotInstalledError,
    PgqueQueueNotFound,
)
from pgque.multi_consumer import MultiQueueConsumer

__all__ = ["ACCEPTED", "COMMANDS", "Target", "candidates", "load_target", "run_target"]

log = logging.getLogger("pgque.cli.worker")

#: What ``MODULE:ATTR`` may name, as the error messages say it.
ACCEPTED = (
    "give a pgque.Consumer, AsyncConsumer, MultiQueueConsumer or AsyncMultiQueueConsumer,"
    " or a function of no arguments that returns one"
)

Runnable = Consumer | AsyncConsumer | MultiQueueConsumer | AsyncMultiQueueConsumer
_KINDS = (Consumer, AsyncConsumer, MultiQueueConsumer, AsyncMultiQueueConsumer)
_ASYNC_KINDS = (AsyncConsumer, AsyncMultiQueueConsumer)
_LEVELS = ("debug", "info", "warning", "error", "critical")


# -- finding the object ------------------------------------------------------------------


@dataclass
class Target:
    """What ``MODULE:ATTR`` named: a consumer, or a coroutine function making one in the
    event loop that will run it (``factory``)."""

    label: str
    runnable: Runnable | None = None
    factory: Callable[[], Awaitable[Any]] | None = None


def _split(target: str) -> tuple[str, str | None]:
    """``MODULE:ATTR`` as (module, attr or None), refusing a file name for MODULE."""
    module, colon, attr = target.partition(":")
    module, attr = module.strip(), attr.strip()
    if module.endswith(".py") or "/" in module or os.sep in module:
        name = module.removesuffix(".py").strip("/").replace("/", ".").replace(os.sep, ".")
        raise CliError(
            f"{module!r} is a file, not a module name: write `pgque worker {name}:{attr or 'ATTR'}`"
            " from the directory that holds it (or set PYTHONPATH)",
            ExitCode.USAGE,
        )
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise CliError(
            f"{target!r} is not MODULE:ATTR: give a module and the consumer in it,"
            " e.g. `pgque worker myapp.consumers:consumer`",
            ExitCode.USAGE,
        )
    if colon and not (attr and all(part.isidentifier() for part in attr.split("."))):
        raise CliError(
            f"{target!r} is not MODULE:ATTR: after the colon give the consumer's name in"
            f" {module}, e.g. `pgque worker {module}:consumer`",
            ExitCode.USAGE,
        )
    return module, attr or None


def _shown_path(filename: str) -> str:
    """A file name relative to the current directory when it is under it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:
        return filename


def _raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised (``file, line N``), or "" when unknown: the last line
    of the traceback in the current directory outside installed packages (the
    application's, not a library's that checked an argument), else the last one."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{_shown_path(exc.filename)}, line {exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if "importlib" not in frame.filename
        and frame.filename != __file__
        and not frame.filename.startswith("<")  # generated code: <string>, <frozen ...>
    ]
    here = Path.cwd()
    own = [
        frame
        for frame in frames
        if Path(frame.filename).resolve().is_relative_to(here)
        and not {"site-packages", "dist-packages"} & set(Path(frame.filename).parts)
    ]
    if not (frames := own or frames):
        return ""
    return f"{_shown_path(frames[-1].filename)}, line {frames[-1].lineno}"


def _why(exc: BaseException) -> str:
    """An exception as ``Type: first line of its message (where)``."""
    text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else first_line(str(exc))
    where = _raised_at(exc)
    return f"{type(exc).__name__}: {text}" + (f" ({where})" if where else "")


def _import(name: str) -> ModuleType:
    """Import module ``name`` with the current directory first on ``sys.path``."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        import importlib

        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if name == missing or name.startswith(missing + "."):
            raise CliError(
                f"cannot import module {name!r}: there is no module {missing!r} in the"
                f" current directory ({here}) nor on sys.path: run `pgque worker` from your"
                " project's directory, or set PYTHONPATH",
                ExitCode.USAGE,
            ) from exc
        raise CliError(f"cannot import module {name!r}: {_why(exc)}", ExitCode.FAILURE) from exc
    except Exception as exc:
        raise CliError(f"cannot import module {name!r}: {_why(exc)}", ExitCode.FAILURE) from exc


def _is_factory(obj: object) -> bool:
    """A function (or other non-class callable) that might return a consumer."""
    return callable(obj) and not isinstance(obj, type) and not isinstance(obj, _KINDS)


def _returns_consumer(func: Callable[..., Any]) -> bool:
    """Whether ``func``'s return annotation names a consumer class."""
    try:
        annotation = inspect.signature(func).return_annotation
    except (TypeError, ValueError):
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return any(kind.__name__ in str(text) for kind in _KINDS)


def candidates(module: ModuleType) -> list[str]:
    """The module's names that look like consumers: instances, and functions of the
    module, of no arguments, annotated to return one (shown with ``()``)."""
    found = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("__"):
            continue
        if isinstance(value, _KINDS):
            found.append(name)
        elif (
            _is_factory(value)
            and getattr(value, "__module__", None) == module.__name__
            and _returns_consumer(value)
            and not _required_arguments(value)
        ):
            found.append(f"{name}()")
    return found


def _what_it_has(module: ModuleType, target: str) -> str:
    """The end of a "not found" message: what the module offers instead."""
    found = candidates(module)
    if not found:
        return f"it has nothing that looks like a consumer ({ACCEPTED})"
    shown = ", ".join(f"{target}:{name.removesuffix('()')}" for name in found)
    return f"it has {shown}"


def _describe(obj: object) -> str:
    """What an object is, for an error message: ``a str ('x')``, ``the class Foo``, ..."""
    if obj is None:
        return "None"
    if isinstance(obj, ModuleType):
        return f"the module {obj.__name__}"
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    kind = type(obj).__qualname__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(obj, (str, bytes, int, float, bool, list, tuple, dict, set)):
        short = reprlib.repr(obj).replace("\n", " ")
        return f"{article} {kind} ({short})"
    return f"{article} {kind}"


def _wrong_kind(label: str, obj: object, *, returned: bool = False) -> CliError:
    what = f"{label} returned" if returned else f"{label} is"
    hint = ""
    if isinstance(obj, type) and issubclass(obj, _KINDS):
        hint = " (the class itself: make one, or a function returning one)"
    return CliError(f"{what} {_describe(obj)}, not a consumer{hint}: {ACCEPTED}", ExitCode.USAGE)


def _required_arguments(func: Callable[..., Any]) -> list[str]:
    """The parameters ``func`` cannot be called without."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p.name for p in params if p.default is p.empty and p.kind not in variadic]


def load_target(target: str) -> Target:
    """Import ``MODULE:ATTR`` and return what it names, a consumer made by calling it
    when it is a function; a :class:`CliError` (one line) when it is none of these."""
    module_name, attr = _split(target)
    module = _import(module_name)
    if attr is None:
        raise CliError(
            f"{target!r} names no consumer: give MODULE:ATTR; {_what_it_has(module, module_name)}",
            ExitCode.USAGE,
        )
    label = f"{module_name}:{attr}"
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise CliError(
                f"module {module_name!r} has no {attr!r}: {_what_it_has(module, module_name)}",
                ExitCode.USAGE,
            ) from None
    if isinstance(obj, _KINDS):
        return Target(label, runnable=obj)
    if not _is_factory(obj):
        raise _wrong_kind(label, obj)
    func: Callable[..., Any] = obj  # type: ignore[assignment]
    needed = _required_arguments(func)
    if needed:
        raise CliError(f"{label} takes arguments ({', '.join(needed)}): {ACCEPTED}", ExitCode.USAGE)
    if inspect.iscoroutinefunction(func):
        return Target(label, factory=func)
    made = _call(label, func)
    if inspect.isawaitable(made):
        return Target(label, factory=lambda: made)
    return Target(label, runnable=_made(label, made))


def _call(label: str, func: Callable[[], Any]) -> Any:
    try:
        return func()
    except Exception as exc:
        raise CliError(f"{label}() failed: {_why(exc)}", ExitCode.FAILURE) from exc


def _made(label: str, made: object) -> Runnable:
    if not isinstance(made, _KINDS):
        raise _wrong_kind(f"{label}()", made, returned=True)
    return made


# -- running it --------------------------------------------------------------------------


def _members(runnable: Runnable) -> list[Consumer | AsyncConsumer]:
    """The consumers ``runnable`` runs: itself, or a multi-queue consumer's."""
    if isinstance(runnable, (MultiQueueConsumer, AsyncMultiQueueConsumer)):
        return list(runnable.consumers)
    return [runnable]


def _apply_concurrency(runnable: Runnable, concurrency: int) -> None:
    """Set ``concurrency`` on every consumer, checked as each consumer checks it."""
    members = _members(runnable)
    for consumer in members:
        try:
            consumer.concurrency = concurrency
        except (TypeError, ValueError) as exc:
            raise CliError(
                f"--concurrency {concurrency}: {first_line(str(exc))} (consumer {consumer.name!r})",
                ExitCode.USAGE,
            ) from exc


def _announce(label: str, runnable: Runnable) -> None:
    shown = ", ".join(
        f"{c.name!r} of queue {c.queue!r} (concurrency {c.concurrency})" for c in _members(runnable)
    )
    kind = type(runnable).__name__
    log.info(
        "pgque worker (pid %d): %s from %s: %s; SIGTERM or Ctrl-C stops it after the batch"
        " in progress", os.getpid(), kind, label, shown,
    )  # fmt: skip


def _start_error(exc: PgqueError) -> CliError:
    """What ended ``start()``, in the consumer's own words (they say what to do) with
    the exit code of its kind."""
    code = ExitCode.FAILURE
    if isinstance(exc, PgqueConnectionError):
        code = ExitCode.CONNECTION
    elif isinstance(exc, PgqueNotInstalledError):
        code = ExitCode.NOT_INSTALLED
    elif isinstance(exc, (PgqueQueueNotFound, PgqueConsumerNotFound)):
        code = ExitCode.NOT_FOUND
    elif isinstance(exc, PgqueInvalidArgument):  # e.g. an @every schedule's cron
        code = ExitCode.USAGE
    return CliError(first_line(str(exc)) or type(exc).__name__, code)


def _prepare(label: str, runnable: Runnable, concurrency: int | None) -> None:
    if concurrency is not None:
        _apply_concurrency(runnable, concurrency)
    _announce(label, runnable)


def run_target(target: Target, concurrency: int | None) -> None:
    """Run what :func:`load_target` found until it stops (``start()`` returns)."""
    try:
        if target.factory is not None:
            asyncio.run(_run_async_factory(target, target.factory, concurrency))
        elif isinstance(target.runnable, _ASYNC_KINDS):
            runnable = target.runnable
            _prepare(target.label, runnable, concurrency)
            asyncio.run(runnable.start())
        elif target.runnable is not None:
            _prepare(target.label, target.runnable, concurrency)
            target.runnable.start()
    except PgqueError as exc:
        raise _start_error(exc) from exc
    log.info("pgque worker (pid %d): stopped", os.getpid())


async def _run_async_factory(
    target: Target, factory: Callable[[], Awaitable[Any]], concurrency: int | None
) -> None:
    """Make the consumer in the event loop that runs it (its pools belong to it)."""
    label = f"{target.label}()"
    try:
        made = await factory()
    except Exception as exc:
        raise CliError(f"{label} failed: {_why(exc)}", ExitCode.FAILURE) from exc
    runnable = _made(target.label, made)
    if not isinstance(runnable, _ASYNC_KINDS):
        raise CliError(
            f"{label} is a coroutine that returned {_describe(runnable)}: an async function"
            " must return an AsyncConsumer or AsyncMultiQueueConsumer (return a"
            " Consumer from a plain function)",
            ExitCode.USAGE,
        )
    _prepare(target.label, runnable, concurrency)
    await runnable.start()


def _configure_logging(level: str | None) -> None:
    """Log records to stderr with their time, at ``level`` (--debug: debug)."""
    name = level or ("debug" if settings().debug else "info")
    logging.basicConfig(
        level=getattr(logging, name.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger().setLevel(getattr(logging, name.upper()))


@command("worker")
@click.argument("target", metavar="MODULE:ATTR")
@click.option(
    "--concurrency",
    type=int,
    default=None,
    metavar="N",
    help="Handle up to N messages of a batch at once (sets every consumer's concurrency).",
)
@click.option(
    "--log-level",
    type=click.Choice(_LEVELS, case_sensitive=False),
    default=None,
    help="Log level of the root logger, on stderr [default: info; debug with --debug].",
)
def worker_cmd(target: str, concurrency: int | None, log_level: str | None) -> None:
    """Run the consumer MODULE:ATTR of your application until SIGTERM or Ctrl-C.

    \b
    ATTR is a Consumer, AsyncConsumer, MultiQueueConsumer or
    AsyncMultiQueueConsumer, or a function of no arguments returning one
    (an async def for the async ones, made in the loop that runs them).
    MODULE is imported with the current directory on sys.path. The consumer
    connects with the DSN it was built with; -d/--dsn, when given, is put
    in PGQUE_DSN for the module to read. SIGTERM or Ctrl-C lets the batch
    in progress finish (at most the consumer's shutdown_timeout); a second
    one stops at once, rolling the batch back.
    """
    _configure_logging(log_level.lower() if log_level else None)
    dsn = settings().dsn
    if dsn:
        os.environ["PGQUE_DSN"] = dsn
    found = load_target(target)
    run_target(found, concurrency)


COMMANDS = [worker_cmd]
