"""Why a Kafka client could not connect, when the reason will not heal by retrying.

Both client libraries turn a failed TLS handshake or SASL exchange into a retry and, at the end,
into a timeout (kafka-python's ``KafkaTimeoutError`` or ``NoBrokersAvailable``, librdkafka's
``_TRANSPORT``): the real reason is only in their logs. So after a failed attempt, whichever
client made it, weir asks the first broker itself, once:

- TLS: a handshake with the client's own settings (``ssl``), read by exception type and
  OpenSSL's verify code (hostname mismatch, unknown CA), or closed by a plaintext listener;
- a plaintext client to a TLS listener: a handshake that completes where none was wanted;
- SASL: one connection through kafka-python's connection manager (``kafka.net``), whose
  failure carries the mechanism's or the broker's error.

A broker that does not answer at all gives no reason (``None``): that may heal, and the caller
goes on retrying.
"""

from __future__ import annotations

import logging
import socket
import ssl
from typing import Any

from weir.engine.kafka_security import KafkaSecurity, env_var, split_host

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0
# a TLS listener answers a ClientHello at once; a plaintext one may wait for more bytes
PLAIN_PROBE_TIMEOUT_S = 1.0
# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH and X509_V_ERR_IP_ADDRESS_MISMATCH
_NAME_MISMATCH = (62, 64)


def first_broker(bootstrap: str) -> tuple[str, int]:
    """``h1:9093,h2:9093`` -> ``("h1", 9093)`` (``[::1]:9093`` too)."""
    return split_host(bootstrap.split(",")[0])


def tls_context(security: KafkaSecurity) -> ssl.SSLContext:
    """The context kafka-python builds from the same settings (``KafkaSSLTransport``); what
    librdkafka checks of a certificate is the same (``rdkafka_config``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = security.ssl_check_hostname
    if security.ssl_cafile:
        ctx.load_verify_locations(security.ssl_cafile)
    else:
        ctx.load_default_certs()
    if security.ssl_certfile:
        ctx.load_cert_chain(
            security.ssl_certfile, security.ssl_keyfile, password=security.ssl_key_password
        )
    return ctx


def diagnose(bootstrap: str, security: KafkaSecurity) -> str | None:
    """What to fix, in one line naming the broker, when its TLS or SASL refuses this client;
    None when the broker cannot be reached or nothing wrong was found."""
    host, port = first_broker(bootstrap)
    try:
        sock = socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S)
    except OSError:
        return None
    with sock:
        reason = _tls_reason(sock, host, security) if security.tls else _plain_reason(sock)
    if reason is not None:
        return f"Kafka broker {host}:{port}: {reason}"
    if security.sasl:
        reason = _sasl_reason(bootstrap, security)
        if reason is not None:
            return f"Kafka broker {host}:{port}: {reason}"
    return None


def _tls_reason(sock: socket.socket, host: str, security: KafkaSecurity) -> str | None:
    try:
        ctx = tls_context(security)
        with ctx.wrap_socket(sock, server_hostname=host) as tls:
            return _after_handshake(tls)
    except ssl.SSLCertVerificationError as exc:
        if exc.verify_code in _NAME_MISMATCH:
            return (
                f"its TLS certificate does not name {host!r} ({exc.verify_message}); connect "
                "by a name the certificate has, or set ssl_check_hostname=false (this turns "
                "off a check against impostors)"
            )
        where = f"ssl_cafile={security.ssl_cafile}" if security.ssl_cafile else "the system CAs"
        return (
            f"its TLS certificate is not trusted ({exc.verify_message}); check that {where} "
            f"holds the CA that signed the broker's certificate (ssl_cafile or "
            f"{env_var('ssl_cafile')})"
        )
    except (ssl.SSLEOFError, ConnectionResetError, TimeoutError):
        return (
            "it did not complete a TLS handshake: is this a plaintext listener? Use the "
            "broker's TLS port, or security_protocol=PLAINTEXT (SASL_PLAINTEXT) for this one"
        )
    except ssl.SSLError as exc:
        return (
            f"the TLS handshake failed ({exc.reason or exc.strerror}); check ssl_certfile and "
            "ssl_keyfile (a broker that requires a client certificate) and the broker's TLS "
            "settings"
        )
    except OSError:
        return None


def _after_handshake(tls: ssl.SSLSocket) -> str | None:
    """TLS 1.3 servers refuse a client certificate after the handshake: read briefly."""
    tls.settimeout(0.3)
    try:
        got = tls.recv(1)
    except ssl.SSLError as exc:
        got, reason = b"", f" ({exc.reason})"
    except OSError:  # nothing to read: the broker waits for a request, as it should
        return None
    else:
        reason = ""
    if got:
        return None
    # a Kafka broker never closes a new connection unasked, unless it refused the client
    return (
        f"it closed the connection right after the TLS handshake{reason}: it requires a client "
        f"certificate this client does not have or it does not trust; check ssl_certfile and "
        f"ssl_keyfile ({env_var('ssl_certfile')}, {env_var('ssl_keyfile')})"
    )


def _plain_reason(sock: socket.socket) -> str | None:
    """A plaintext client: does the port answer a TLS handshake? (then it wants TLS)"""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sock.settimeout(PLAIN_PROBE_TIMEOUT_S)
    try:
        with ctx.wrap_socket(sock):
            pass
    except OSError:  # ssl.SSLError included: not a TLS listener, as expected
        return None
    return (
        "this port speaks TLS but the client is plaintext; set security_protocol=SSL (or "
        f"SASL_SSL) with ssl_cafile, as URL options or {env_var('security_protocol')}"
    )


def _sasl_reason(bootstrap: str, security: KafkaSecurity) -> str | None:
    from kafka import errors
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector

    net = NetworkSelector()
    manager = KafkaConnectionManager(
        net, bootstrap_servers=bootstrap, request_timeout_ms=int(PROBE_TIMEOUT_S * 1000),
        **security.client_kwargs(),
    )  # fmt: skip
    node = manager.cluster.bootstrap_brokers()[0].node_id
    conns: list[Any] = []

    async def attempt() -> None:
        conns.append(manager.get_connection(
            node, timeout_ms=PROBE_TIMEOUT_S * 1000, pop_on_close=False,
            refresh_metadata_on_err=False,
        ))  # fmt: skip
        await conns[0]

    try:
        net.run(attempt)
        return None
    except errors.UnsupportedSaslMechanismError:
        return (
            f"it does not offer SASL mechanism {security.sasl_mechanism}; set sasl_mechanism "
            f"to one the broker enables ({env_var('sasl_mechanism')})"
        )
    except (OSError, errors.KafkaConnectionError, errors.KafkaTimeoutError) as exc:
        # the broker answered ApiVersions, then dropped the connection: during SASL
        if conns and conns[0].broker_version_data is not None:
            return _refused(security, type(exc).__name__)
        return None  # no answer: may heal
    except Exception as exc:  # noqa: BLE001 - any other failure of the SASL exchange is a refusal
        return _refused(security, type(exc).__name__)
    finally:
        _close(manager, net)


def _refused(security: KafkaSecurity, what: str) -> str:
    return (
        f"SASL {security.sasl_mechanism} authentication as {security.sasl_username!r} was "
        f"refused ({what}); check the user name and password ({env_var('sasl_username')}, "
        f"{env_var('sasl_password')} or sasl_password_file), that the user exists for this "
        "mechanism and that the broker enables it"
    )


def _close(manager: Any, net: Any) -> None:
    try:
        manager.close()
    finally:
        net.close()
