# the token from the environment, never on the command line (ps shows command lines)
export WEIR_API_TOKEN="$(cat weir-token)"
weir run job.py --api-host 0.0.0.0 --allowed-hosts weir.example.internal
