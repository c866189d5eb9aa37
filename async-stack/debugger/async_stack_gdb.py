"""gdb commands for async-stack: `async-bt`, `async-tasks` and
`async-deadlocks`.

Load with ``source /path/to/debugger/async_stack_gdb.py`` (the reader,
``async_stack_reader.py``, is found next to this file), or embed the text
of ``async_stack_reader.py`` followed by this file's text as one auto-load
script. See ``async_stack_reader.py`` for the commands; this module only
adapts gdb to its :class:`Target` interface. It reads memory and never
calls into the inferior, so the commands work on core files.
"""

import os
import re
import sys

import gdb

try:
    import async_stack_reader as _reader
except ImportError:
    _here = os.path.dirname(os.path.abspath(globals().get("__file__", "")))
    if os.path.isfile(os.path.join(_here, "async_stack_reader.py")):
        sys.path.insert(0, _here)
        import async_stack_reader as _reader
    elif "run_command" in globals():
        # The reader's text came first in this very script.
        _reader = sys.modules[__name__]
    else:
        raise

#: `info symbol`'s answer: "NAME + OFFSET in section S" ("NAME in section
#: S" at offset 0), the offset being what to subtract for the start.
_SYMBOL_OFFSET = re.compile(r"^(.*?)(?: \+ (\d+))? in section \S+")


class GdbTarget(_reader.Target):
    """The selected inferior, as the reader sees it."""

    def read(self, address, size):
        return gdb.selected_inferior().read_memory(address, size).tobytes()

    def symbol_address(self, name):
        # The descriptor is a `#[no_mangle]` static: a minimal symbol, which
        # only a C expression names whatever the frame's language is.
        try:
            text = gdb.execute(
                "with language c -- output/x (unsigned long) &%s" % name,
                to_string=True)
        except gdb.error:
            return None
        # gdb may append a warning about the frame's language.
        match = re.match(r"\s*(0x[0-9a-fA-F]+)", text)
        return int(match.group(1), 16) if match else None

    def _info(self, thread):
        return _reader.ThreadInfo(thread.num, thread.ptid[1], thread.name,
                                  thread)

    def threads(self):
        listed = gdb.selected_inferior().threads()
        return [self._info(t) for t in sorted(listed, key=lambda t: t.num)]

    def current_thread(self):
        thread = gdb.selected_thread()
        if thread is None:
            raise _reader.AsyncStackError("no thread selected (no process?)")
        return self._info(thread)

    def native_frames(self, thread):
        selected = gdb.selected_thread()
        frame = gdb.selected_frame() if selected is not None else None
        thread.handle.switch()
        try:
            return list(self._walk(gdb.newest_frame()))
        finally:
            if selected is not None:
                selected.switch()
                if frame is not None and frame.is_valid():
                    frame.select()

    def _walk(self, frame):
        newest = True
        while frame is not None:
            sal = frame.find_sal()
            file = sal.symtab.filename if sal.symtab is not None else None
            # A caller's pc is a return address: look up the call before it.
            pc = frame.pc() if newest else frame.pc() - 1
            start, symbol = self._symbol(pc)
            # Without debug info, gdb names a frame by its symbol, hash kept.
            name = _reader.without_hash(frame.name())
            # A function of its own that line tables name short takes the
            # symbol table's full name, as the walker does.
            if (frame.type() != gdb.INLINE_FRAME and symbol
                    and _reader.is_short_name(name, file)):
                name = _reader.without_hash(symbol)
            yield _reader.NativeFrame(name, file, sal.line or None,
                                      None, start)
            newest = False
            try:
                frame = frame.older()
            except gdb.error:
                return

    @staticmethod
    def _symbol(address):
        """``(start, name)`` of the symbol-table function holding
        ``address`` (from `info symbol`: "NAME + OFFSET in section ..."),
        or ``(None, None)``."""
        try:
            text = gdb.execute("info symbol %#x" % address, to_string=True)
        except gdb.error:
            return None, None
        match = _SYMBOL_OFFSET.match(text.strip())
        if match is None:
            return None, None
        return address - int(match.group(2) or "0"), match.group(1)

    def function_start(self, address):
        return self._symbol(address - 1)[0] if address > 0 else None

    def is_live(self):
        inferior = gdb.selected_inferior()
        connection = getattr(inferior, "connection", None)
        if connection is not None:
            return connection.type != "core"
        return inferior.pid != 0 and "core" not in gdb.execute(
            "info target", to_string=True).lower()


class AsyncStackCommand(gdb.Command):
    """Runs one of the reader's commands, printing its text."""

    def __init__(self, name):
        super().__init__(name, gdb.COMMAND_STACK)
        self._name = name

    def invoke(self, argument, from_tty):
        gdb.write(_reader.run_command(GdbTarget(), self._name, argument) + "\n")


class AsyncBt(AsyncStackCommand):
    """async-bt [all | task <id>]: native frames with async frames spliced
    in (current thread, or every thread), or one task's tree."""

    def __init__(self):
        super().__init__("async-bt")


class AsyncTasks(AsyncStackCommand):
    """async-tasks: every live task: id, name, state, time in state, and
    the .await its innermost frame waits on."""

    def __init__(self):
        super().__init__("async-tasks")


class AsyncDeadlocks(AsyncStackCommand):
    """async-deadlocks: the deadlocks among tasks waiting for async-stack's
    locks, semaphores and JoinHandles, as async_stack::deadlocks() reports
    them (both .await lines of each wait), or that there is none."""

    def __init__(self):
        super().__init__("async-deadlocks")


AsyncBt()
AsyncTasks()
AsyncDeadlocks()
