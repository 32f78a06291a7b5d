"""The ``agent-worker replay capture`` program: a real ticket's history into the replay gate (``history``), its
payloads opened through the codec (``payloads``) and its personal data redacted (``redaction``)."""
