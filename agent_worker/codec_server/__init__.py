"""The ``agent-worker codec-server`` program: decrypts payloads for the Web UI and ``temporal --codec-endpoint``
(``app``), for those its authentication lets through (``auth``)."""
