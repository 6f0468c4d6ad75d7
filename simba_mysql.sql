-- simba_mysql.sql -- the schema of simba's MySQL/MariaDB backend (simba_mysql.h),
-- for DBAs who create it by hand instead of letting clients run it
-- (simba_mysql_desc.create_schema = 1 runs exactly these statements).
--
-- Works on MariaDB >= 10.2 and MySQL >= 5.7 (InnoDB, DYNAMIC rows).
-- Tables use the default prefix "simba_"; with another table_prefix, replace
-- "simba_" in the four table names below (and in the upgrades' four).
--
--   mariadb -u admin -p yourdb < simba_mysql.sql
--
-- The least privileges a simba client needs (user 'app'@'%' and database
-- yourdb as examples):
--
--   GRANT SELECT, INSERT, UPDATE, DELETE ON yourdb.simba_sessions  TO 'app'@'%';
--   GRANT SELECT, INSERT, UPDATE, DELETE ON yourdb.simba_resources TO 'app'@'%';
--   GRANT SELECT, INSERT, UPDATE, DELETE ON yourdb.simba_entries   TO 'app'@'%';
--   GRANT INSERT                         ON yourdb.simba_capacity_audit TO 'app'@'%';
--
-- (plus CREATE and ALTER on those tables if clients should create or
-- upgrade the schema themselves.) GET_LOCK/RELEASE_LOCK, used for wake-ups, need no privilege.
--
-- The tenant column is a namespace, not a security boundary: every user
-- with these grants can change every tenant's rows. Tenants that must not
-- touch each other's locks get a database and a user each, with these
-- grants on their own database only (docs/mysql.md, "Tenant isolation").
--
-- All names are VARBINARY: resource names are arbitrary bytes, compared
-- byte-wise, so two different names can never collide through a collation.
-- Times are milliseconds since the epoch by the DATABASE SERVER's clock
-- (UNIX_TIMESTAMP(NOW(3)) with time_zone '+00:00'); fences are BIGINT.

-- One row per client session. A session's entries (held and waiting) live
-- exactly as long as this row has expires_ms > server now; one keepalive
-- UPDATE of this row renews all of a client's locks at once, and stamps
-- renewed_ms, so that `simba status` can tell a holder that stopped renewing.
CREATE TABLE IF NOT EXISTS simba_sessions (
    tenant      VARBINARY(64)  NOT NULL,
    session     VARBINARY(96)  NOT NULL,  -- "<client id>~<16 hex>"
    client      VARBINARY(64)  NOT NULL,
    expires_ms  BIGINT         NOT NULL,  -- server time; dead when <= now
    notify      BIGINT         NOT NULL DEFAULT 0,  -- bumped by DELETE and SET_CAPACITY
                                                    -- of a resource the session is queued in
    renewed_ms  BIGINT         NOT NULL DEFAULT 0,  -- server time of its OPEN or latest
                                                    -- KEEPALIVE; 0: not known
    PRIMARY KEY (tenant, session),
    KEY simba_sessions_expiry (expires_ms)
) ENGINE=InnoDB;

-- The upgrade in place of a sessions table made before renewed_ms (it adds
-- the column, keeping every row; a no-op once it is there). Run this file
-- again, or connect one client with create_schema = 1, BEFORE clients of this
-- version start on such a database: they write renewed_ms. Clients of the
-- older version go on working next to them (their sessions show no renewal
-- time). MySQL has no ADD COLUMN IF NOT EXISTS, hence the chosen statement.
SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `simba_sessions` ADD COLUMN ',
    IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS ', ''), 'renewed_ms BIGINT NOT NULL DEFAULT 0'), 'DO 0')
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
    AND TABLE_NAME = 'simba_sessions' AND COLUMN_NAME = 'renewed_ms');
PREPARE simba_upgrade FROM @simba_upgrade;
EXECUTE simba_upgrade;
DEALLOCATE PREPARE simba_upgrade;

-- One row per resource (lock name). Every operation on a resource locks this
-- row (SELECT ... FOR UPDATE, several rows in sorted name order), which
-- serialises all changes to the resource's queue.
CREATE TABLE IF NOT EXISTS simba_resources (
    tenant      VARBINARY(64)  NOT NULL,
    name        VARBINARY(256) NOT NULL,
    capacity    INT            NOT NULL,  -- mutex 1, semaphore N, rwlock R
    counter     BIGINT         NOT NULL DEFAULT 0,  -- the last fence granted
    seq         BIGINT         NOT NULL DEFAULT 0,  -- the last queue position given out
    empty_seq   BIGINT         NOT NULL DEFAULT -1, -- the queue was empty when seq was this
                                                    -- (-1: not known); see below
    h_request   VARBINARY(128) NULL,      -- capacity < 0: a sole holder's hold is kept
    h_session   VARBINARY(96)  NULL,      -- in this row (at queue position seq, the
    h_weight    INT            NOT NULL DEFAULT 0,  -- capacity being -capacity),
    h_fence     BIGINT         NOT NULL DEFAULT 0,  -- not in simba_entries; see below
    PRIMARY KEY (tenant, name)
) ENGINE=InnoDB;

-- empty_seq lets the procedures below skip reading the queue: every entry
-- is inserted with seq + 1 under this row's lock (by clients of every
-- version), so empty_seq = seq means nobody was queued since the queue was
-- seen empty. Only the procedures of version 2 write it, and only after
-- seeing the queue empty under the row's lock; clients that do not know the
-- column leave it behind seq, which only sends the next op the slower way.
-- The upgrade in place of a resources table made before empty_seq, as the
-- one of the sessions table above (run before clients of this version start).
SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `simba_resources` ADD COLUMN ',
    IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS ', ''), 'empty_seq BIGINT NOT NULL DEFAULT -1'), 'DO 0')
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
    AND TABLE_NAME = 'simba_resources' AND COLUMN_NAME = 'empty_seq');
PREPARE simba_upgrade FROM @simba_upgrade;
EXECUTE simba_upgrade;
DEALLOCATE PREPARE simba_upgrade;

-- The hold in the row (docs/mysql.md, "The hold in the row"): a sole holder
-- that found its queue empty has no entry; its hold is kept in the resource's
-- row, marked by a negative capacity, so an uncontended acquire is one UPDATE
-- of the row and its release another. Every other op first moves such a hold
-- into simba_entries (at queue position seq) under the row's lock. Clients of
-- older releases read the negative capacity as bad data (SIMBA_EPROTO) and
-- grant nothing on that resource: upgrade every client. The upgrade in place
-- of a resources table made before the h_ columns (as the ones above):
SET @simba_upgrade = (SELECT IF(COUNT(*) = 0, CONCAT('ALTER TABLE `simba_resources` ',
    REPLACE('ADD COLUMN ? h_request VARBINARY(128) NULL, ADD COLUMN ? h_session VARBINARY(96) NULL, '
    'ADD COLUMN ? h_weight INT NOT NULL DEFAULT 0, ADD COLUMN ? h_fence BIGINT NOT NULL DEFAULT 0',
    '?', IF(VERSION() LIKE '%MariaDB%', 'IF NOT EXISTS', ''))), 'DO 0')
    FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()
    AND TABLE_NAME = 'simba_resources' AND COLUMN_NAME = 'h_request');
PREPARE simba_upgrade FROM @simba_upgrade;
EXECUTE simba_upgrade;
DEALLOCATE PREPARE simba_upgrade;

-- The FIFO queues: one row per (request, resource), clustered in queue order
-- (seq comes from the resource row, under its lock). An entry is granted
-- when the weights ahead of it plus its own fit in the capacity; fence is 0
-- while waiting and set once when it is granted.
CREATE TABLE IF NOT EXISTS simba_entries (
    tenant      VARBINARY(64)  NOT NULL,
    name        VARBINARY(256) NOT NULL,
    seq         BIGINT         NOT NULL,  -- position in the resource's queue
    request     VARBINARY(128) NOT NULL,  -- idempotency: unique per resource
    session     VARBINARY(96)  NOT NULL,
    weight      INT            NOT NULL,  -- 0 = exclusive (the whole capacity)
    fence       BIGINT         NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, name, seq),
    UNIQUE KEY simba_entries_request (tenant, name, request),
    KEY simba_entries_session (tenant, session)
) ENGINE=InnoDB;

-- Every SET_CAPACITY leaves a row here: who changed what, when (server time).
CREATE TABLE IF NOT EXISTS simba_capacity_audit (
    id            BIGINT         NOT NULL AUTO_INCREMENT,
    tenant        VARBINARY(64)  NOT NULL,
    name          VARBINARY(256) NOT NULL,
    old_capacity  INT            NULL,    -- NULL: the resource did not exist
    new_capacity  INT            NOT NULL,
    session       VARBINARY(96)  NOT NULL,
    at_ms         BIGINT         NOT NULL,
    PRIMARY KEY (id),
    KEY simba_capacity_audit_name (tenant, name)
) ENGINE=InnoDB;

-- MariaDB only (>= 10.1.3; the backend calls them only on MariaDB, and on
-- MySQL you may stop before this point): the two procedures that settle an
-- uncontended ENQUEUE and RELEASE in one statement each (docs/mysql.md,
-- "One round trip"). A client calls them when it may (EXECUTE on them, see
-- below) and otherwise sends the same text as a compound statement, so
-- they only make it faster. They run with the caller's rights (SQL
-- SECURITY INVOKER). The suffix is their version: a release that changes
-- them installs new names next to these, so clients of both go on working.
-- With another table_prefix, replace "simba_" in their names and bodies.
-- Grants for them (optional):
--
--   GRANT EXECUTE ON PROCEDURE yourdb.simba_settle_enqueue_3 TO 'app'@'%';
--   GRANT EXECUTE ON PROCEDURE yourdb.simba_settle_release_3 TO 'app'@'%';
DELIMITER //
CREATE PROCEDURE IF NOT EXISTS `simba_settle_enqueue_3`(p_tenant VARBINARY(64), p_name VARBINARY(256), p_request VARBINARY(128), p_session VARBINARY(96), p_weight INT, p_capacity INT, p_grace BIGINT, p_bell VARBINARY(64))
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
DECLARE sf, sk, ss, se, hq, hf BIGINT DEFAULT NULL;
DECLARE sc, sb, hl, nf INT DEFAULT NULL;
DECLARE hs, hr VARBINARY(128) DEFAULT NULL;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET nf = 1;
START TRANSACTION;
IF p_bell IS NOT NULL THEN
SET sb = IF(IS_USED_LOCK(p_bell) <=> CONNECTION_ID(), 1, GET_LOCK(p_bell, 0));
END IF;
SELECT capacity, seq, GREATEST(counter + 1, (UNIX_TIMESTAMP()*1000000+MICROSECOND(NOW(6)))), empty_seq INTO sc, ss, sf, se FROM `simba_resources` WHERE tenant=p_tenant AND name=p_name FOR UPDATE;
IF sc IS NULL THEN
INSERT INTO `simba_resources` (tenant,name,capacity,counter,seq) VALUES (p_tenant,p_name,p_capacity,0,0);
SET sc = p_capacity, ss = 0, se = -1, sf = GREATEST(1, (UNIX_TIMESTAMP()*1000000+MICROSECOND(NOW(6))));
END IF;
IF sc < 0 THEN
INSERT INTO `simba_entries` (tenant,name,seq,request,session,weight,fence) SELECT tenant,name,seq,h_request,h_session,h_weight,h_fence FROM `simba_resources` WHERE tenant=p_tenant AND name=p_name;
UPDATE `simba_resources` SET capacity=-capacity, empty_seq=seq-1, h_request=NULL, h_session=NULL, h_weight=0, h_fence=0 WHERE tenant=p_tenant AND name=p_name;
SET sc = -sc, se = -1;
END IF;
IF sc >= p_weight AND (se = ss OR NOT EXISTS (SELECT 1 FROM `simba_entries` WHERE tenant=p_tenant AND name=p_name)) AND EXISTS (SELECT 1 FROM `simba_sessions` WHERE tenant=p_tenant AND session=p_session AND expires_ms > CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED)) AND CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED) >= p_grace THEN
INSERT INTO `simba_entries` (tenant,name,seq,request,session,weight,fence) VALUES (p_tenant,p_name,ss+1,p_request,p_session,p_weight,sf);
UPDATE `simba_resources` SET counter=sf, seq=ss+1, empty_seq=ss WHERE tenant=p_tenant AND name=p_name;
COMMIT;
ELSE SET sf = NULL;
END IF;
SELECT 2 AS k, sf, sc, ss, sb, hs, hr;
END //
CREATE PROCEDURE IF NOT EXISTS `simba_settle_release_3`(p_tenant VARBINARY(64), p_name VARBINARY(256), p_request VARBINARY(128), p_session VARBINARY(96), p_weight INT, p_capacity INT, p_grace BIGINT, p_bell VARBINARY(64))
MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
DECLARE sf, sk, ss, se, hq, hf BIGINT DEFAULT NULL;
DECLARE sc, sb, hl, nf INT DEFAULT NULL;
DECLARE hs, hr VARBINARY(128) DEFAULT NULL;
DECLARE CONTINUE HANDLER FOR NOT FOUND SET nf = 1;
START TRANSACTION;
SELECT capacity, counter, seq, empty_seq INTO sc, sk, ss, se FROM `simba_resources` WHERE tenant=p_tenant AND name=p_name FOR UPDATE;
IF sc < 0 THEN
INSERT INTO `simba_entries` (tenant,name,seq,request,session,weight,fence) SELECT tenant,name,seq,h_request,h_session,h_weight,h_fence FROM `simba_resources` WHERE tenant=p_tenant AND name=p_name;
UPDATE `simba_resources` SET capacity=-capacity, empty_seq=seq-1, h_request=NULL, h_session=NULL, h_weight=0, h_fence=0 WHERE tenant=p_tenant AND name=p_name;
SET sc = -sc, se = -1;
END IF;
IF se = ss - 1 THEN
DELETE FROM `simba_entries` WHERE tenant=p_tenant AND name=p_name AND request=p_request AND session=p_session;
IF ROW_COUNT() = 1 THEN
UPDATE `simba_resources` SET empty_seq=ss WHERE tenant=p_tenant AND name=p_name;
COMMIT;
SET sf = 0;
END IF;
END IF;
IF sf IS NULL THEN
SELECT e.seq, e.fence, e.session, e.request, IFNULL(s.expires_ms > CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED), 0) INTO hq, hf, hs, hr, hl FROM `simba_entries` e FORCE INDEX (PRIMARY) LEFT JOIN `simba_sessions` s ON s.tenant=e.tenant AND s.session=e.session WHERE e.tenant=p_tenant AND e.name=p_name AND (e.request<>p_request OR e.session<>p_session) ORDER BY e.seq LIMIT 1;
IF hq IS NULL OR (sc = 1 AND hl = 1 AND CAST(UNIX_TIMESTAMP(NOW(3))*1000 AS SIGNED) >= p_grace) THEN
DELETE FROM `simba_entries` WHERE tenant=p_tenant AND name=p_name AND request=p_request AND session=p_session;
IF hq IS NOT NULL AND hf = 0 THEN
SET sf = GREATEST(sk + 1, (UNIX_TIMESTAMP()*1000000+MICROSECOND(NOW(6))));
UPDATE `simba_entries` SET fence=sf WHERE tenant=p_tenant AND name=p_name AND seq=hq AND fence=0;
UPDATE `simba_resources` SET counter=sf WHERE tenant=p_tenant AND name=p_name;
ELSE SET sf = 0, hs = NULL, hr = NULL;
END IF;
IF hq IS NULL THEN
UPDATE `simba_resources` SET empty_seq=ss WHERE tenant=p_tenant AND name=p_name;
END IF;
COMMIT;
ELSE SET sf = NULL;
END IF;
END IF;
IF sf IS NOT NULL AND p_bell IS NOT NULL THEN
DO RELEASE_LOCK(p_bell);
END IF;
SELECT 2 AS k, sf, sc, ss, sb, hs, hr;
END //
DELIMITER ;
