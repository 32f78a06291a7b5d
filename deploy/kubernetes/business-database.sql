-- The business store's database and its two roles, run once by a database administrator with psql:
--   psql -v owner=agent_owner -v app=agent_app -v database=business -f deploy/kubernetes/business-database.sql
-- then give each role a password (ALTER ROLE ... PASSWORD). The owner runs the migrations (the Job
-- agent-worker-migrate, Secret agent-worker-schema-owner); the workers and the inbox connect as the other role,
-- which reads and writes rows of every table the owner creates and can create, alter or drop none.
\set ON_ERROR_STOP on
CREATE ROLE :"owner" LOGIN;
CREATE ROLE :"app" LOGIN;
CREATE DATABASE :"database" OWNER :"owner";
\connect :"database"
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"app";
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO :"app";
