"""The prompt set of `radixgate bench accuracy`: short user turns across the kinds of work a chat model gets.

Facts, arithmetic, code, translation, instructions, writing, reasoning and chit-chat, so that a
dtype's error shows on more than one kind of text. Each is one user message; the bench wraps it in
the model's chat template.
"""

PROMPTS: tuple[str, ...] = (
    # facts
    "What is the capital of France?",
    "What is the capital of Japan?",
    "Who wrote Romeo and Juliet?",
    "What is the largest planet in the solar system?",
    "At what temperature does water boil at sea level?",
    "What gas do plants absorb from the air?",
    "How many continents are there?",
    "What is the chemical symbol for gold?",
    "Who painted the Mona Lisa?",
    "What is the longest river in Africa?",
    "Name the three primary colors.",
    "What language is spoken in Brazil?",
    # arithmetic and reasoning
    "What is 12 plus 30?",
    "What is 7 times 8?",
    "If I have 3 apples and eat one, how many are left?",
    "Is 17 a prime number? Answer yes or no and explain.",
    "What is half of 250?",
    "Which is heavier, a kilogram of feathers or a kilogram of iron?",
    "A train leaves at 3 pm and travels for 2 hours. When does it arrive?",
    "Sort these numbers from smallest to largest: 9, 2, 7, 4.",
    # code
    "Write a Python function that returns the square of a number.",
    "How do I reverse a list in Python?",
    "What does the SQL statement SELECT * FROM users do?",
    "Write a bash command that counts the lines in a file.",
    "Explain what a for loop is in one sentence.",
    "What is the difference between a list and a tuple in Python?",
    "Write a JavaScript function that adds two numbers.",
    "What is a hash map?",
    # translation and language
    "Translate 'good morning' into Spanish.",
    "Translate 'thank you' into French.",
    "What is the plural of 'mouse'?",
    "Give me a synonym for 'happy'.",
    "What is the opposite of 'ancient'?",
    "Correct the grammar: 'She don't like apples.'",
    # instructions and advice
    "How do I boil an egg?",
    "Give me three tips for sleeping better.",
    "How can I save money on groceries?",
    "What should I pack for a day at the beach?",
    "How do I make a cup of tea?",
    "Suggest a name for a pet goldfish.",
    "What are the benefits of regular exercise?",
    "How do I change a flat tire?",
    # writing
    "Write a haiku about autumn leaves.",
    "Write one sentence describing a sunset over the ocean.",
    "Write a short thank-you note to a teacher.",
    "Tell me a short story about a brave mouse.",
    "Describe the taste of a lemon.",
    "Write a slogan for a coffee shop.",
    # explanation
    "Why is the sky blue?",
    "How do rainbows form?",
    "What causes the seasons on Earth?",
    "Explain photosynthesis to a child.",
    "What is gravity?",
    "How does a refrigerator keep food cold?",
    "What is the internet?",
    # conversation
    "Hello! How are you today?",
    "Can you recommend a good book?",
    "What is your favorite color?",
    "Tell me a fun fact about octopuses.",
    "What do you know about the moon?",
)
