-- The business store (orders, refunds, emails, audit) lives beside Temporal's own databases.
CREATE DATABASE business;
