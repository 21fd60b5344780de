"""Files: reading ``.npy``/``.npz`` arrays that may be corrupt or hostile, writing atomically.

Every reader checks what a file declares before it allocates anything: the
``.npy`` header's shape and dtype against the size the zip directory (or the
file system) gives the array, and a zip member's size against what its
compressed bytes could possibly expand to. Nothing is ever unpickled. Every
failure, whatever layer it comes from (``zipfile``, ``zlib``, NumPy's header
parser, the operating system), is one ``ValueError`` that names the file and
says what is wrong with it.

Writers put each file under a hidden temporary name in its directory,
``.<name>.<random>.tmp``, which no glob for outputs (``*.npz``, ``*.csv``)
matches, and rename it over the target only once it is complete.
"""

import math
import os
import stat
import tempfile
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
#: Deflate cannot expand data more than 1032-fold; a zip member that claims
#: more than this times its compressed size (plus a little) is corrupt or a bomb.
_MAX_DEFLATE_RATIO = 1032
_RATIO_SLACK_BYTES = 4096
_CHUNK_BYTES = 16 * 2**20
#: What can go wrong reading a file, from every layer under the readers (NumPy's header parser
#: tokenizes and evaluates the header text: an unclosed bracket is a TokenError, a nesting too deep
#: a RecursionError, a shape of thousands of digits an OverflowError).
_READ_ERRORS = (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, NotImplementedError,
                RuntimeError, tokenize.TokenError, SyntaxError, OverflowError)


def _size(n_bytes):
    if n_bytes >= 2**70:  # a hostile header's claim, beyond a float's range maybe
        return f"about 2**{n_bytes.bit_length() - 1} bytes"
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} bytes"


def _file_kind(path):
    """``"npy"`` or ``"npz"`` from the first bytes of ``path``; ValueError for anything else."""
    try:
        with open(path, "rb") as stream:
            start = stream.read(8)
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error}).") from None
    if start.startswith(_NPY_MAGIC):
        return "npy"
    if start.startswith(_ZIP_MAGICS):
        return "npz"
    shown = "it is empty" if not start else f"it starts with {start!r}"
    raise ValueError(
        f"{path}: is not a NumPy .npy or .npz file ({shown}). Save arrays with numpy.save or "
        "numpy.savez; fastprop never reads pickled data."
    )


def _read_header(stream, where):
    """``(shape, fortran_order, dtype)`` of the ``.npy`` stream; object, zero-width and sub-array dtypes and
    negative dimensions refused."""
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f"{where} uses .npy format version {version}; fastprop reads versions 1.0 and 2.0.")
    if dtype.hasobject:
        raise ValueError(
            f"{where} holds Python objects (dtype {dtype}), which fastprop never unpickles. "
            "Save plain numeric arrays."
        )
    if dtype.itemsize == 0 or dtype.subdtype is not None:  # zero-width text; items that are arrays themselves
        raise ValueError(
            f"{where} has items of dtype {dtype!s:.40}, which fastprop does not read. Save plain numbers "
            "or text (numpy.save of an array of numbers or of non-empty strings)."
        )
    if any(dimension < 0 for dimension in shape):
        raise ValueError(f"{where} declares a negative dimension in its shape; the file is corrupt.")
    return shape, fortran_order, dtype


def _read_data(stream, shape, fortran_order, dtype, n_bytes, where):
    """The array body: exactly ``n_bytes``, read in chunks into one preallocated array."""
    flat = np.empty(math.prod(shape), dtype=dtype)
    if n_bytes:
        buffer = memoryview(flat.view(np.uint8))
        done = 0
        while done < n_bytes:
            count = stream.readinto(buffer[done : done + _CHUNK_BYTES])
            if not count:
                raise EOFError(f"{where} ends after {done} of its {n_bytes} bytes")
            done += count
    if stream.read(1):
        raise ValueError(f"{where} holds more bytes than its header declares")
    return flat.reshape(shape, order="F" if fortran_order else "C")


def _expected_bytes(shape, dtype):
    return math.prod(shape) * dtype.itemsize


def _describe(shape, dtype):
    shown = str(tuple(shape))
    if len(shown) > 80:  # a hostile header's shape of thousands of digits
        shown = shown[:60] + " ...)"
    return f"shape {shown} of {dtype} ({_size(_expected_bytes(shape, dtype))})"


def read_npy(path):
    """The array of an ``.npy`` file, its declared size checked against the file's first.

    Raises
    ------
    ValueError
        The file is missing, unreadable, not an ``.npy`` file, truncated, holds
        Python objects, items of no width (``<U0``) or that are arrays
        themselves, declares a negative dimension, or declares another size
        than it has.
    """
    path = os.fsdecode(path)
    if _file_kind(path) != "npy":
        raise ValueError(f"{path}: is an .npz archive, not an .npy file.")
    try:
        with open(path, "rb") as stream:
            shape, fortran_order, dtype = _read_header(stream, path)
            available = os.fstat(stream.fileno()).st_size - stream.tell()
            n_bytes = _expected_bytes(shape, dtype)
            if n_bytes != available:
                raise ValueError(
                    f"{path} declares an array of {_describe(shape, dtype)} but holds {_size(available)} "
                    "of data; the file is truncated or corrupt."
                )
            return _read_data(stream, shape, fortran_order, dtype, n_bytes, path)
    except _READ_ERRORS as error:
        raise _read_error(path, error) from None


def _read_error(where, error):
    """One ValueError for any failure reading ``where`` (a path, or a path and an array name)."""
    kind = type(error)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    text = str(error) if isinstance(error, ValueError) else f"{name}: {error}"
    if text.startswith(where):  # one of ours
        return ValueError(text)
    return ValueError(f"{where}{'' if ': array ' in where else ':'} cannot be read ({text}).")


class NpzArchive:
    """The arrays of an ``.npz`` file, each read only after its declared size is checked.

    Use as a context manager. :meth:`header` gives an array's shape and
    dtype without reading it, so that callers can check arrays against each
    other before reading the large ones; :meth:`read` reads one.

    Parameters
    ----------
    path : str or os.PathLike
    """

    def __init__(self, path):
        self.path = os.fsdecode(path)
        if _file_kind(self.path) != "npz":
            raise ValueError(f"{self.path}: is an .npy file, not an .npz archive.")
        try:
            self._zip = zipfile.ZipFile(self.path)
            self._file_size = os.path.getsize(self.path)
        except _READ_ERRORS as error:
            raise _read_error(self.path, error) from None
        self._members = {}
        for info in self._zip.infolist():
            if info.filename.endswith(".npy"):
                self._members[info.filename[: -len(".npy")]] = info
        self._headers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
        return False

    def close(self):
        self._zip.close()

    @property
    def names(self):
        """The names of the arrays, as ``numpy.savez`` was given them."""
        return sorted(self._members)

    def _where(self, name):
        return f"{self.path}: array {name!r}"

    def _check_member(self, name):
        """The zip directory's claims about ``name``, checked against the file."""
        info = self._members[name]
        where = self._where(name)
        if info.flag_bits & 0x1:
            raise ValueError(f"{where} is encrypted; fastprop reads plain numpy.savez archives.")
        if info.compress_type == zipfile.ZIP_STORED:
            possible = info.compress_size
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            possible = _MAX_DEFLATE_RATIO * info.compress_size + _RATIO_SLACK_BYTES
        else:
            raise ValueError(
                f"{where} uses zip compression method {info.compress_type}; fastprop reads archives "
                "of numpy.savez (stored) and numpy.savez_compressed (deflate)."
            )
        if info.compress_size > self._file_size or info.file_size > possible:
            raise ValueError(
                f"{where} claims {_size(info.file_size)} from {_size(info.compress_size)} of the "
                f"{_size(self._file_size)} file, more than its compression can hold; the archive is "
                "corrupt or hostile."
            )
        return info

    def header(self, name):
        """``(shape, dtype)`` of array ``name``, from its header, after checking it against the zip directory."""
        if name not in self._members:
            raise ValueError(
                f"{self.path}: has no array {name!r} (it holds {self.names}); "
                f"save it as numpy.savez(path, {name}={name})."
            )
        if name not in self._headers:
            info = self._check_member(name)
            where = self._where(name)
            try:
                with self._zip.open(info) as stream:
                    shape, fortran_order, dtype = _read_header(stream, where)
                    header_bytes = stream.tell()
            except _READ_ERRORS as error:
                raise _read_error(where, error) from None
            if header_bytes + _expected_bytes(shape, dtype) != info.file_size:
                raise ValueError(
                    f"{where} declares {_describe(shape, dtype)} but the archive gives it "
                    f"{_size(info.file_size - header_bytes)}; the archive is corrupt or hostile."
                )
            self._headers[name] = shape, fortran_order, dtype
        shape, _, dtype = self._headers[name]
        return shape, dtype

    def read(self, name):
        """Array ``name``; its header is checked first (see :meth:`header`)."""
        shape, dtype = self.header(name)
        _, fortran_order, _ = self._headers[name]
        where = self._where(name)
        try:
            with self._zip.open(self._members[name]) as stream:
                _read_header(stream, where)
                return _read_data(stream, shape, fortran_order, dtype, _expected_bytes(shape, dtype), where)
        except _READ_ERRORS as error:
            raise _read_error(where, error) from None


#: Paths that name a stream of the process, not a file: writing there through a temporary file and a rename
#: would replace whatever the stream is (a terminal, a pipe, or the file the shell redirected it to).
_STREAM_NAMES = ("/dev/stdin", "/dev/stdout", "/dev/stderr")
_STREAM_DIRECTORIES = ("/dev/fd/", "/proc/")


def output_target(path):
    """The file an output ``path`` names, its links followed; a ValueError says why it cannot be one.

    Refused: a directory, a missing directory, a link loop, a stream of the
    process (``/dev/stdout``, ``/dev/fd/N``, anything under ``/proc``) and
    any other existing file that is not a regular one (a FIFO, a device such
    as ``/dev/null``, a socket). The messages name no path: the caller says
    which output it is.
    """
    given = os.fsdecode(path)
    if not given or given.endswith(os.sep):
        raise ValueError("it names no file; give a file name.")
    absolute = os.path.abspath(given)
    try:
        # realpath drops "missing/.." by the text, where the system refuses the path: ask the system first
        if not os.path.isdir(os.path.dirname(given) or os.curdir):
            raise ValueError(f"directory {os.path.dirname(given)!r} does not exist.")
        target = Path(os.path.realpath(given))  # a link's target, so that the link is not replaced by a file
        if absolute in _STREAM_NAMES or any(name.startswith(_STREAM_DIRECTORIES)
                                            for name in (absolute, os.fspath(target))):
            raise ValueError(
                "it is a stream of this process, not a file; give the name of a file to create or replace."
            )
        try:
            mode = os.stat(given).st_mode  # follows links; a loop raises
        except FileNotFoundError:
            mode = None  # a new file, or a link to one
        if mode is not None and stat.S_ISDIR(mode):
            raise ValueError("it is a directory; give a file name.")
        if mode is not None and not stat.S_ISREG(mode):
            raise ValueError(
                "it is not a regular file (a FIFO, a device or a socket); give the name of a file to create "
                "or replace."
            )
        if not target.parent.is_dir():
            shown = target.parent if os.path.islink(given) else Path(given).parent
            raise ValueError(f"directory {os.fspath(shown)!r} does not exist.")
    except OSError as error:  # a link loop, a name too long for the file system
        raise ValueError(f"{error.strerror or error}.") from None
    return target


def write_atomically(outputs):
    """Write several files, each to a temporary name in its directory, then rename them.

    Parameters
    ----------
    outputs : list of (path, write)
        ``write(stream)`` fills a binary stream.

    No target is touched until every temporary file is complete, so a failed
    or interrupted run leaves the old files as they were and no partial file.
    The temporary files (``.<name>.<random>.tmp``, hidden, never matched by a
    glob for the outputs) are removed on any exception, ``KeyboardInterrupt``
    and ``SystemExit`` included; only a process killed outright (SIGKILL)
    can leave one behind.

    A target that is a symbolic link is followed: the file it points to is
    replaced, the link stays.

    Raises
    ------
    ValueError
        A target's directory does not exist, a target is a directory, a link
        loop, another file that is not a regular one (a FIFO, a device) or a
        stream of the process (``/dev/stdout``): :func:`output_target`.
    OSError
        Writing failed (permissions, disk full); the message names the target,
        not the temporary file.
    """
    targets = []
    for path, _ in outputs:
        try:
            targets.append(output_target(path))
        except ValueError as error:
            raise ValueError(f"cannot write {os.fsdecode(path)!r}: {error}") from None
    mask = os.umask(0)
    os.umask(mask)
    temporaries = []
    target = None
    try:
        for target, (_, write) in zip(targets, outputs):
            handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            temporaries.append(temporary)
            with os.fdopen(handle, "wb") as stream:
                write(stream)
                stream.flush()
                os.fsync(stream.fileno())
            os.chmod(temporary, 0o666 & ~mask)
        for target, temporary in zip(targets, temporaries):
            os.replace(temporary, target)
    except OSError as error:
        raise OSError(error.errno, f"cannot write {os.fspath(target)!r}: {error.strerror or error}") from None
    finally:
        for temporary in temporaries:
            if os.path.exists(temporary):
                os.remove(temporary)
