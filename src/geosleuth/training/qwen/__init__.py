"""The Qwen-VL processing the training engines share: chat template, processors, the image frame."""
