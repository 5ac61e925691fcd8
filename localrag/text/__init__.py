"""Text out of PDFs and questions: pages and their convention, a document's identity, language, words."""
