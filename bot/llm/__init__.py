"""The optional language-model reader (issue 34; docs/llm.md).

Its rule: the model is asked only after a poll (``reading``), its answers are
validated on arrival (``answer``) and cached (``store``), and everything that
builds or sends a digest reads the cache alone (``reader.load_readings``,
``present``). Off unless DIGESTBOT_LLM_BASE_URL and DIGESTBOT_LLM_MODEL are set.
"""
