"""The broker connection of the Celery app: what a worker needs to live through a Redis restart, and to be back
within a couple of seconds of Redis returning.

`Transport` (CELERY_BROKER_TRANSPORT with a redis:// broker) is kombu's Redis transport with a channel that closes
cleanly when Redis is gone. Found with kombu 5.7.0 and celery 5.7.0 (tests/resilience/test_redis_restart.py): when
the consumer loses its connection while a BRPOP is in flight, celery calls `Connection.collect()` and then
`Connection.close()`. In `collect()`, closing the default channel raised at its first step (draining that BRPOP
meets the dead socket), so the channel was never marked closed, and `collect()` then detached the transport from
its connection (`transport.client = None`). `close()` closed the same channel again; this time it got as far as
restoring its unacknowledged messages (a late-acked task was running), which built a Redis pool from
`transport.client`: AttributeError: 'NoneType' object has no attribute 'hostname'. That is neither a connection
nor a channel error, so celery called it an "Unrecoverable error" and the worker exited. Closing a channel with a
fanout queue (gossip's) raised the connection error too, and celery, which had already dropped its connection,
logged "Error on restarting Gossip" with an AttributeError of its own.

Here a close that meets Redis gone does what needs no Redis (the channel leaves its poller, drops its pools and
clients, is marked closed) and skips the rest: deleting the fanout bindings of auto-delete queues, and restoring the
unacknowledged messages. Nothing is lost by that: each unacknowledged message is still in Redis's `unacked` hash,
and the transport's restore_visible puts it back on its queue once BROKER_VISIBILITY_TIMEOUT_S passed (every
late-acked task here is safe to run twice; settings.py says why). A channel used after its transport was detached
says that Redis is out of reach, with Redis's own ConnectionError, which celery and kombu handle.

`Connection` (through `AMQP`, the app's amqp class) tries to reach a lost broker every second or two. Celery's
consumer takes kombu's defaults, 2, 4, 6, ... up to 30 s between tries: a worker found Redis back only on its next
try (at 12 s for a 10 s outage, at 20 s for a 13 s one, then up to 30 s late), and consumed nothing meanwhile.
"""

from __future__ import annotations

import contextlib
import logging

from celery.app import amqp
from kombu import Connection as KombuConnection
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

log = logging.getLogger(__name__)

# Seconds between tries to reach a lost broker: 1, 2, 2, ...
RECONNECT_FIRST_S, RECONNECT_STEP_S, RECONNECT_MAX_S = 1.0, 1.0, 2.0


class Channel(kombu_redis.Channel):
    def close(self) -> None:
        try:
            super().close()
        except self.connection_errors as exc:
            log.info("broker: closing a channel without Redis (%s): its unacknowledged messages come back later", exc)
            # Again without what needs Redis: the BRPOP in flight is dropped (reading it reset _in_poll), the fanout
            # bindings are only deleted through a cached client, and a restore that cannot reach Redis is given up.
            self.__dict__.pop("client", None)
            with contextlib.suppress(*self.connection_errors):
                super().close()

    def _connparams(self, asynchronous: bool = False) -> dict:
        if self.connection.client is None:
            raise RedisConnectionError("the broker connection of this channel is closed (Redis went away)")
        return super()._connparams(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


class Connection(KombuConnection):
    def ensure_connection(
        self,
        errback=None,
        max_retries=None,
        interval_start: float = RECONNECT_FIRST_S,
        interval_step: float = RECONNECT_STEP_S,
        interval_max: float = RECONNECT_MAX_S,
        **kwargs,
    ) -> Connection:
        return super().ensure_connection(errback, max_retries, interval_start, interval_step, interval_max, **kwargs)


class AMQP(amqp.AMQP):
    Connection = Connection
    BrokerConnection = Connection
