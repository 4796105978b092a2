"""langchain-ragspine: retrieval for Japanese, Chinese and English documents as LangChain parts."""
