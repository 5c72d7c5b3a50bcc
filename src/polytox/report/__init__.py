"""Reports over run directories: plots (matplotlib, optional extra ``report``), and self-contained HTML,
Markdown and JSON renderings of the leaderboard and the analyses. Reads only from run stores."""
