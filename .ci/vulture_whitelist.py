# Reviewed: what vulture (make deadcode) reports as unused in the product code but is used from
# outside Python's view: names that frameworks, other processes or users call. Each entry says
# who uses it. A name that is really dead is removed from the code, never added here.
# (Not Python to run: vulture reads the names; ruff skips this file.)

# PEP 562 module attributes: the import system calls them (weir, weir.api, weir.state,
# weir.engine, weir.engine.sql, sources, sinks and runtime.stored load their names on first
# use; dir(weir) and dir(weir.client) show the public API only)
__getattr__
__dir__
# a module's class, set so that the import system's setattr of a submodule keeps a function of
# the same name (weir/base/lazy.py: sources.kafka())
_.__class__

# FastAPI calls these: exception handlers and routes registered by decorators
_api_error  # api/errors.py
_invalid  # api/errors.py
load_backfill  # api/routes/admin.py
get_broadcast_state  # api/routes/broadcast.py
get_job  # api/routes/jobs.py
swagger_ui  # api/routes/docs.py
swagger_ui_redirect  # api/routes/docs.py
redoc  # api/routes/docs.py
asset  # api/routes/docs.py
pull_query  # api/routes/sql.py

# pydantic reads them: model settings and response fields serialised into answers
model_config  # api/models.py
key_group_ranges  # api/models.py, JobInfo's checkpoints
expires_at  # api/routes/auth.py, the stream token's answer

# uvicorn reads it: set to stop the server
_.should_exit  # app/httpserve.py
# uvicorn calls it around serving: weir's server takes SIGTERM only (Ctrl-C is the command's)
_.capture_signals  # app/httpserve.py

# the context-manager protocol names __exit__'s third argument
tb  # app/progress.py, weir/testing.py

# read on the other side of a process boundary: the worker's status, decoded by the API process
# (api/metrics.py reads them from the status JSON)
source_lag  # engine/runtime/messages.py
backpressure  # engine/runtime/messages.py
dead_letters_by_stage  # engine/runtime/messages.py
dead_letter_kinds  # engine/runtime/messages.py (summed by runtime/control/outcome.py)

# in `weir backfill`'s JSON result (BackfillResult.to_json)
compute_seconds  # engine/spark/backfill.py

# sqlglot reads it: the dialect's identifier quotes
IDENTIFIERS  # engine/sql/dialect.py

# the job API's public methods, which user functions and jobs call (Flink's names)
_.flat_map  # engine/streams.py, DataStream.flat_map
_.delete_processing_time_timer  # engine/runtime/operators/process.py and broadcast.py contexts
_.contains  # engine/runtime/operators/broadcast_state.py, ReadOnlyBroadcastState.contains

# set by the expression API (issue 38 item 1, branch expr); the columnar loop's compiled path
# reads them once that API lands
key_expr  # engine/nodes.py, KeyByNode
timestamp_expr  # engine/nodes.py, SourceNode

# multiprocessing calls them on a Popen / Process class (engine/runtime/control/zygote.py)
_.duplicate_for_child  # reduction.DupFd, while a process object is pickled
_._launch  # popen_fork.Popen.__init__
_.finalizer  # popen_fork.Popen.close
_._send_signal  # popen_fork.Popen.kill / terminate
_._Popen  # process.BaseProcess.start
_._inheriting  # process.current_process(), read by AuthenticationString while unpickling
_.DupFd  # reduction.DupFd: the class a pickled descriptor becomes

# Starlette's Response.__call__ reads them (api/routes/state.py, JsonAnswer)
_.background
_.raw_headers
