"""Memory for agents (issue 27): a long-term store on Qdrant, an entity graph, a short-term window, memory skills.

Generic: nothing here names a domain. See :mod:`memory_store` (the store and its measured figures),
:mod:`memory_actor` (one Ray owner of a shared store), :mod:`entity_graph`, :mod:`short_term_window`,
:mod:`memory_session` and :mod:`memory_skills` (``memory.search`` / ``memory.write`` through the gateway), and
:mod:`functional` / :mod:`memory_episode` (what the L4 memory layer and the Entity Recall@5 metric read).

The package imports nothing itself: the reward layer reads only the light pure modules, and must not pull
qdrant-client (about 1.6 s to import) into every reward worker.
"""
