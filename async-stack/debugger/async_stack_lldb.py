"""lldb commands for async-stack: `async-bt`, `async-tasks` and
`async-deadlocks`.

Load with ``command script import /path/to/debugger/async_stack_lldb.py``
(the reader, ``async_stack_reader.py``, is found next to this file). See
``async_stack_reader.py`` for the commands; this module only adapts lldb
to its :class:`Target` interface. It reads memory and never calls into the
process, so the commands work on core files (``lldb -c core binary``).
"""

import os
import re
import sys

import lldb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import async_stack_reader as _reader  # noqa: E402

# Legacy Rust mangling escapes, which lldb 14 leaves in names.
_ESCAPES = {
    "$LT$": "<", "$GT$": ">", "$LP$": "(", "$RP$": ")", "$C$": ",",
    "$RF$": "&", "$BP$": "*", "$SP$": "@", "$u20$": " ", "$u22$": '"',
    "$u27$": "'", "$u2b$": "+", "$u3b$": ";", "$u5b$": "[", "$u5d$": "]",
    "$u7b$": "{", "$u7d$": "}", "$u7e$": "~",
}
_HASH = _reader.SYMBOL_HASH
_ESCAPE = re.compile(r"\$(?:LT|GT|LP|RP|C|RF|BP|SP|u[0-9a-f]{2})\$")


def demangle(name):
    """A Rust symbol name as lldb 14 gives it, in the `a::b::c` form with
    the hash dropped (legacy mangling); other names are returned as is."""
    if not name or not _HASH.search(name):
        return name
    name = _HASH.sub("", name)
    segments = []
    for segment in name.split("::"):
        if segment.startswith("_$"):
            segment = segment[1:]
        segment = segment.replace("..", "::")
        segments.append(_ESCAPE.sub(lambda m: _ESCAPES.get(m.group(0), m.group(0)),
                                    segment))
    return "::".join(segments)


class LldbTarget(_reader.Target):
    """The selected target and process, as the reader sees them."""

    def __init__(self, debugger):
        self._target = debugger.GetSelectedTarget()
        self._process = self._target.GetProcess()
        if not self._process.IsValid():
            raise _reader.AsyncStackError("no process (run it or load a core)")

    def read(self, address, size):
        error = lldb.SBError()
        data = self._process.ReadMemory(address, size, error)
        if not error.Success():
            raise IOError(error.GetCString())
        return data

    def symbol_address(self, name):
        for context in self._target.FindSymbols(name):
            address = context.GetSymbol().GetStartAddress()
            load = address.GetLoadAddress(self._target)
            if load != lldb.LLDB_INVALID_ADDRESS:
                return load
        return None

    @staticmethod
    def _info(thread):
        return _reader.ThreadInfo(thread.GetIndexID(), thread.GetThreadID(),
                                  thread.GetName(), thread)

    def threads(self):
        return [self._info(t) for t in self._process]

    def current_thread(self):
        thread = self._process.GetSelectedThread()
        if not thread.IsValid():
            raise _reader.AsyncStackError("no thread selected")
        return self._info(thread)

    def native_frames(self, thread):
        return [self._frame(f) for f in thread.handle]

    def _start(self, symbol):
        """The load address of ``symbol`` (an `SBSymbol`), or None."""
        if not symbol.IsValid():
            return None
        load = symbol.GetStartAddress().GetLoadAddress(self._target)
        return None if load == lldb.LLDB_INVALID_ADDRESS else load

    def _frame(self, frame):
        symbol = frame.GetSymbol()
        name = demangle(frame.GetFunctionName() or symbol.GetName())
        # The symbol table's function: the machine code the frame runs,
        # whatever was inlined into it.
        function = self._start(symbol)
        entry = frame.GetLineEntry()
        if not (entry.IsValid() and entry.GetFileSpec().IsValid()):
            return _reader.NativeFrame(name, None, None, None, function)
        file = entry.GetFileSpec().fullpath
        # A function of its own that line tables name short takes the
        # symbol table's full name, as the walker does.
        if (not frame.IsInlined() and symbol.IsValid() and symbol.GetName()
                and _reader.is_short_name(name, file)):
            name = demangle(symbol.GetName())
        return _reader.NativeFrame(name, file, entry.GetLine() or None,
                                   entry.GetColumn() or None, function)

    def function_start(self, address):
        if address <= 0:
            return None
        resolved = self._target.ResolveLoadAddress(address - 1)
        return self._start(resolved.GetSymbol())

    def is_live(self):
        return self._process.GetPluginName() != "elf-core"


def _run(command, debugger, argument, result):
    """Runs one reader command; every problem becomes one line."""
    try:
        target = LldbTarget(debugger)
    except _reader.AsyncStackError as error:
        result.AppendMessage(_reader.ERROR_PREFIX + str(error))
        return
    result.AppendMessage(_reader.run_command(target, command, argument))


def async_bt(debugger, command, result, internal_dict):
    """async-bt [all | task <id>]: native frames with async frames spliced
    in (current thread, or every thread), or one task's tree."""
    _run("async-bt", debugger, command, result)


def async_tasks(debugger, command, result, internal_dict):
    """async-tasks: every live task: id, name, state, time in state, and
    the .await its innermost frame waits on."""
    _run("async-tasks", debugger, command, result)


def async_deadlocks(debugger, command, result, internal_dict):
    """async-deadlocks: the deadlocks among tasks waiting for async-stack's
    locks, semaphores and JoinHandles, as async_stack::deadlocks() reports
    them (both .await lines of each wait), or that there is none."""
    _run("async-deadlocks", debugger, command, result)


def __lldb_init_module(debugger, internal_dict):
    for name, function in (("async-bt", "async_bt"),
                           ("async-tasks", "async_tasks"),
                           ("async-deadlocks", "async_deadlocks")):
        debugger.HandleCommand("command script add -f %s.%s %s"
                               % (__name__, function, name))
