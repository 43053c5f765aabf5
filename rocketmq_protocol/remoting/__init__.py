"""RocketMQ's classic TCP remoting protocol (name server + brokers): frames, codes, headers, message codecs.

Modules: `codes` (request/response codes, languages, versions), `flags` (sysflag bits), `frames`
(RemotingCommand, JSON/ROCKETMQ headers, stream splitting), `headers` (typed custom headers),
`properties` (message properties), `message_id` (offset ids, UNIQ_KEY), `message_codec` (columnar stored
and batch encodings), `fastjson` and `route` (name-server JSON), `signature` (ACL), `errors`.
"""
