# Starts moto_server with three changes to moto 5.2.1 (the version
# tools/requirements.txt pins) that make a call cost what it would in AWS,
# not time in proportion to everything moto holds; what each API call does
# is unchanged. With any other moto version it starts moto as it is.
#
# 1. DynamoDB calls run one at a time, as DynamoDB applies each write (and
#    each transaction) atomically: moto serves requests on threads, and two
#    conditional writes to one item could otherwise both pass their check,
#    or a cancelled transaction's rollback undo another call's write.
#    TransactWriteItems backs up only the items the transaction touches,
#    instead of a deep copy of every table it names (which, taken while
#    another request thread writes to the table, also fails with
#    "dictionary changed size during iteration", HTTP 500). All of its
#    operations apply, or none, and a cancelled one leaves no record on a
#    table's stream (moto's own rollback left an INSERT and a REMOVE).
# 2. SQS SendMessage reads the one queue attribute it needs, and
#    ReceiveMessage the retention period, instead of all of them (the
#    approximate counts walk every message of the queue, per message
#    received).
# 3. Which service a request is for is worked out once per host name, not
#    on every request (moto lists its modules on disk and tries hundreds of
#    URL patterns each time).
# 4. A condition expression is split into tokens once per distinct text, not
#    on every call (moto's tokenizer compiles and tries six patterns per
#    token, the largest single part of a conditional write). What they mean is
#    still worked out on every call, with that call's names and values.
# 5. The actions a response class answers are listed once per class, not
#    on every request (moto walks every member of the class each time).
# 6. It serves HTTP with waitress, which keeps a client's connection open
#    between requests as AWS endpoints do, instead of werkzeug's development
#    server, which closes every connection after one response: each call
#    paid for a new connection and a new thread, and a batch's ten
#    concurrent writes took twice as long.
# 7. Python's cycle collector scans only what is new since its last full
#    collection: after each one, every object that survived it is moved out
#    of the collector's sight (gc.freeze). Everything moto holds lives until
#    a reset, and a full collection walked all of it while every request
#    waited: pauses grew with the state, 0.2-0.3 s after 3,000 jobs, and put
#    a few hundred milliseconds on any call they caught. Freed memory is
#    unchanged for objects with no reference cycle (reference counting frees
#    them); cyclic garbage that was still alive at a full collection is not
#    reclaimed (measured: a one-off 96,000 objects from moto's start, then
#    under one object per job). A reset hands everything back to the
#    collector.
#
# Usage: python launch.py [moto_server arguments]
import copy
import sys
import threading
import types
from importlib.metadata import version


def _patch():
    _patch_transactions()
    _patch_send_message()
    import moto.backends

    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: modules
    _patch_dispatch()
    _patch_condition_tokens()
    _patch_action_names()
    _patch_gc()



def _patch_transactions():
    import moto.dynamodb.models as ddb
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    def deepcopy(x, memo=None):
        # Moto's rollback copy of a whole table: hand back the live table,
        # so moto's own rollback (putting its "copy" back) changes nothing;
        # the touched items are restored below instead.
        if isinstance(x, Table):
            return x
        return copy.deepcopy(x, memo)

    def touched(backend, transact_items):
        """(table, hash key, range key, item before or None) per operation."""
        out = []
        for entry in transact_items:
            if len(entry) != 1:
                continue  # moto's own checks reject it
            op_type, op = next(iter(entry.items()))
            try:
                table = backend.get_table(op["TableName"])
                key = op["Item"] if op_type == "Put" else op["Key"]
                hash_key = DynamoType(key[table.hash_key_attr])
                range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                current = table.get_item(hash_key, range_key)
            except Exception:
                continue  # moto's own checks report it
            out.append((table, hash_key, range_key, copy.deepcopy(current)))
        return out

    original = ddb.DynamoDBBackend.transact_write_items

    def transact_write_items(self, transact_items):
        before = touched(self, transact_items)
        # Each touched table's stream length: a cancelled transaction leaves
        # no stream record behind, as in DynamoDB (moto appends one per
        # operation it applied before the failing one, and deleting an item
        # to restore it would append a REMOVE too).
        streams = {id(t): (t, len(t.stream_shard.items)) for t, *_ in before if t.stream_shard is not None}
        try:
            return original(self, transact_items)
        except BaseException:
            for table, hash_key, range_key, item in reversed(before):
                if item is None:
                    if range_key is not None:
                        table.items.get(hash_key, {}).pop(range_key, None)
                    else:
                        table.items.pop(hash_key, None)
                elif range_key is not None:
                    table.items[hash_key][range_key] = item
                else:
                    table.items[hash_key] = item
            for table, n in streams.values():
                if table.stream_shard is not None:
                    del table.stream_shard.items[n:]
            raise

    ddb.copy = types.SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)
    ddb.DynamoDBBackend.transact_write_items = transact_write_items

    from moto.dynamodb.responses import DynamoHandler

    one_at_a_time = threading.Lock()
    call_action = DynamoHandler.call_action

    def serialized_call_action(self):
        with one_at_a_time:
            return call_action(self)

    DynamoHandler.call_action = serialized_call_action


def _patch_dispatch():
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    backend_for_host = DomainDispatcherApplication.get_backend_for_host
    known = {}

    def cached_backend_for_host(self, host):
        # Called under the dispatcher's lock; the answer depends on the host
        # name alone.
        if host not in known:
            known[host] = backend_for_host(self, host)
        return known[host]

    DomainDispatcherApplication.get_backend_for_host = cached_backend_for_host


def _patch_condition_tokens():
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser

    tokenize = ConditionExpressionParser._lex_condition_expression
    known = {}

    def cached_tokenize(self):
        # The tokens are immutable tuples and depend on the text alone; the
        # parser consumes its deque, so each call gets a fresh one. A text
        # that fails to tokenize raises as before and is not kept.
        text = self.condition_expression
        tokens = known.get(text)
        if tokens is None:
            tokens = tuple(tokenize(self))
            if len(known) < 4096:
                known[text] = tokens
        return deque(tokens)

    ConditionExpressionParser._lex_condition_expression = cached_tokenize


def _patch_action_names():
    import moto.core.responses as responses

    list_actions = responses.method_names_from_class
    known = {}

    def cached_actions(cls):
        # A class's functions do not change while moto runs; callers only
        # test membership, so one frozen set serves them all.
        actions = known.get(cls)
        if actions is None:
            actions = known[cls] = frozenset(list_actions(cls))
        return actions

    responses.method_names_from_class = cached_actions


def _serve(argv):
    """Serves moto on waitress, with moto_server's -H and -p arguments."""
    import argparse

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from waitress import create_server

    parser = argparse.ArgumentParser(prog="moto (runstwice launcher)")
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args(argv)
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    try:
        # Enough threads that long-polling receives (one per poller, up to
        # 20 s each) never hold up other calls, and room for every client's
        # idle kept-alive connections (waitress stops accepting at 100).
        server = create_server(
            app, host=args.host, port=args.port, threads=64, connection_limit=2000,
            asyncore_use_poll=True, ident="moto",
        )
    except OSError as e:
        # The harness reads "in use" from EADDRINUSE's message.
        print("runstwice: cannot listen on %s:%d: %s" % (args.host, args.port, e.strerror), file=sys.stderr, flush=True)
        sys.exit(1)
    # What start-up built (modules, the server) is never garbage: one full
    # collection now, whose survivors patch 7 keeps out of every later one.
    import gc

    gc.collect()
    # The line moto_server prints, which the harness waits for.
    print("Running on http://%s:%d" % (args.host, args.port), flush=True)
    server.run()


def _patch_gc():
    import gc

    from moto.moto_api._internal.models import MotoAPIBackend

    def freeze_survivors(phase, info):
        # Called by the collector itself, with the GIL held: the collection
        # is over and nothing else runs until this returns.
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()

    gc.callbacks.append(freeze_survivors)
    reset = MotoAPIBackend.reset

    def reset_and_unfreeze(self):
        reset(self)
        # The old state is garbage now; let the next full collection see it.
        gc.unfreeze()

    MotoAPIBackend.reset = reset_and_unfreeze


_sending = threading.local()


def _patch_send_message():
    from moto.core.utils import unix_time
    from moto.sqs.models import Queue, SQSBackend

    all_attributes = Queue.attributes.fget

    def attributes(self):
        if not getattr(_sending, "on", False):
            return all_attributes(self)
        # All the send path reads: ContentBasedDeduplication, as a string.
        if not self.fifo_queue:
            return {}
        value = self.content_based_deduplication
        return {"ContentBasedDeduplication": str(value).lower() if isinstance(value, bool) else value}

    send = SQSBackend.send_message

    def send_message(self, *args, **kwargs):
        _sending.on = True
        try:
            return send(self, *args, **kwargs)
        finally:
            _sending.on = False

    def is_message_valid_based_on_retention_period(self, queue_name, message):
        retention = int(self.get_queue(queue_name).message_retention_period)
        return retention + message.sent_timestamp / 1000 > unix_time()

    Queue.attributes = property(attributes)
    SQSBackend.send_message = send_message
    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period


if __name__ == "__main__":
    if version("moto") != "5.2.1":
        print("runstwice: moto %s is not the pinned 5.2.1: starting it unchanged" % version("moto"), file=sys.stderr)
        from moto.server import main

        sys.exit(main(sys.argv[1:]))
    _patch()
    _serve(sys.argv[1:])
