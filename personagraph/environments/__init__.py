"""The environment pool, the task specs, environment selection and question generation."""

from personagraph.environments.pool import load_pool, load_tasks, task_by_name
from personagraph.environments.questions import QuestionBatch, Selection, generate_questions, select_environments

__all__ = ["QuestionBatch", "Selection", "generate_questions", "load_pool", "load_tasks", "select_environments", "task_by_name"]
