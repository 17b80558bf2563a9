"""A TCP forwarder in front of a server on loopback that can go down for a while: the chaos harness's object-store
outage (moto's server keeps its objects in memory, so stopping it would lose them: the proxy stops answering instead).

While down, nothing listens on its port (a client's connect is refused, as for a server that is gone) and every open
connection has been cut; when up again it listens on the same port.
"""

from __future__ import annotations

import contextlib
import errno
import random
import socket
import threading
import time

# Below Linux's ephemeral range (32768-60999): while the proxy is down, no outgoing connection of a study can be given
# its port, so it can always listen there again.
PORTS = range(20000, 32000)


class OutageProxy:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0  # chosen when it first listens
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._back: threading.Timer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        """Listen (again) and forward each connection to the target; nothing when already up (the outage's timer and
        end_outage may both call it)."""
        with self._lock:
            if self._listener is not None:
                return
            listener = self._listen()
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _listen(self) -> socket.socket:
        """A listener on self.port, or on a free port of PORTS the first time."""
        for attempt in range(50):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind(("127.0.0.1", self.port or random.choice(PORTS)))
            except OSError as error:
                listener.close()
                if error.errno != errno.EADDRINUSE or (self.port and attempt == 49):
                    raise
                time.sleep(
                    0.1 if self.port else 0
                )  # our port: a closing socket lets go of it; first time: another
                continue
            listener.listen(64)
            self.port = listener.getsockname()[1]
            return listener
        raise OSError(errno.EADDRINUSE, f"no free port for the proxy in {PORTS}")

    def down(self, seconds: float) -> None:
        """Stop answering for `seconds`: the listener closed, every open connection cut; then up again."""
        with self._lock:
            listener, self._listener = self._listener, None
            cut, self._open = self._open, set()
        if listener is not None:
            _close(listener)
        for connection in cut:
            _close(connection)
        self._back = threading.Timer(seconds, self.up)
        self._back.daemon = True
        self._back.start()

    def is_down(self) -> bool:
        return self._listener is None

    def end_outage(self) -> None:
        """Up now, if an outage is under way (the next study must not start inside this one's)."""
        if self._back is not None and self._back.is_alive():
            self._back.cancel()
            self.up()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by down()
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)  # an idle keep-alive connection stays open, as the server's own would
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not listener:  # went down meanwhile
                    _close(client)
                    _close(server)
                    return
                self._open |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open -= {source, sink}
            _close(source)
            _close(sink)


def _close(connection: socket.socket) -> None:
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        connection.close()
