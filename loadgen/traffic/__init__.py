"""What to send and when: arrival shapes and length distributions (``shapes``), prompt content and reuse
(``prompts``), trace replay (``trace``) and a small synthetic trace (``synthetic``)."""
