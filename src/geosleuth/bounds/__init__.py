"""Input bounds: what limits untrusted input before anything decodes it (images, PNG chunks, memory,
deadlines, text rows, OCR strips).
"""
