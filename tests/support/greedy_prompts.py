"""Chat prompts whose greedy answers the engine tests compare token by token with transformers."""

PROMPTS = [  # each answer runs past 32 tokens, so all 32 greedy tokens are compared
    "Write a short story about a dragon who learns to bake bread.",
    "Explain how a car engine works.",
    "Describe the water cycle in detail.",
    "What are the main causes of the French Revolution?",
    "Give me five tips for learning a new language, with an explanation for each.",
]
NUM_REFERENCE_TOKENS = 32
