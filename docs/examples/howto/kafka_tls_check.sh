. ./kafka_tls.env
weir produce --bootstrap broker.example:9093 --topic tls-check --count 1000 --partitions 1
